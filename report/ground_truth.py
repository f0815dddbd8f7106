"""The kernel's word on the page cache (the recorder's cachestat samples) in the assessment.

For a sampled op the kernel said, just before the call, how many of the op's pages were in the
page cache (and, for a write, how many lay past the end of the file). Where that settles the
cause it overrides the model (docs/assessment.md, "The kernel's word"):

- a read of pages that were all cached was served from memory: classed cached when the model
  says so, and a stall (CPU, preemption, page faults: not storage) when it took as long as
  storage I/O;
- a read of pages none of which were cached needed the storage: classed uncached;
- a read of pages the read-ahead of a cold sequential run put there (cachestat counts pages
  still being read in as cached) settles nothing: the model's class;
- a write into pages that were all cached is a stall when it took as long as storage I/O;
- a write into new pages only (past the end of the file, or whole pages of an uncached file:
  nothing to read first) that took as long as storage I/O waited for memory, not the device;
  with the model's appended line, one beyond its bound did, and a write past the end of the
  file is compared with an append's typical time (report/classify.py, classify_ops).

An op that was not sampled keeps the model's class, except where every sampled op of its
process, file and direction (at least MIN_SAMPLES of them, the first ops of each file are
always sampled) found the same state: a file the kernel always found cached cannot have made
an unsampled op wait for storage, so a slow op there is an inferred stall, and an inferred
allocation for a file only ever written into new pages (past its end, or whole pages of it
uncached: every sample the same of the two).
"""
import numpy as np

from ioassess.arrays import distinct
from ioassess.inputs.job import DIRECTIONS, READ, WRITE, Flag, op_column
from ioassess.models.causes import LAYOUTS, memory_layout_codes

from .own_cached import per_size, size_bins
from .passes import Carried, Sums, run_ends, run_starts, stable_order

# The kernel's verdict of an op (codes of KERNEL_STATES; NOT_SAMPLED: no sample).
NOT_SAMPLED = -1
# "new pages": whole pages of which none was cached (a write reads nothing first); "past the end":
# a write only at or past the end of the file (an append). Both go into new page-cache memory.
# "read ahead": a read's pages were all in the page cache, but it continues a sequential run of
# reads of its process and file in which an earlier sample found pages not cached: read-ahead
# put them there and may still be reading them (cachestat counts pages being read in as cached),
# so the read may have waited for storage: not settled.
KERNEL_STATES = ("cached", "partly cached", "not cached", "new pages", "past the end", "read ahead")
CACHED, PARTLY, NOT_CACHED, NEW_PAGES, PAST_END, READ_AHEAD = range(len(KERNEL_STATES))
PAGE_BYTES = 4096
# Sampled ops of one process, file and direction that must all agree before unsampled ones
# there are judged by them.
MIN_SAMPLES = 4
# The model and the kernel agree on cached vs not cached for at least this share of the
# sampled reads whose duration can tell, or the report says the model's classes are not to be
# trusted for this job.
TRUSTED_AGREEMENT = 0.9
# The overlap band of a size: from this quantile of its not-cached reads' durations up to the
# same distance below the top of its cached reads'.
BAND_QUANTILE = 0.05


def kernel_verdicts(ops):
    """Per op, the code of KERNEL_STATES its sample gives (before read-ahead runs are looked at:
    OpsInOrder), NOT_SAMPLED without one."""
    verdict = np.full(len(ops["size"]), NOT_SAMPLED, np.int8)
    if "pc_pages" not in ops:
        return verdict
    sampled = np.flatnonzero(ops["pc_pages"] > 0)     # few ops are: the rest need no look
    pages = ops["pc_pages"][sampled].astype(np.int64)
    cached = op_column(ops, "pc_cached")[sampled].astype(np.int64)
    writes = ops["direction"][sampled] == WRITE
    existing = pages - np.where(writes, np.maximum(op_column(ops, "pc_new_pages")[sampled].astype(np.int64), 0), 0)
    offset, end = ops["offset"][sampled], ops["offset"][sampled] + ops["size"][sampled]
    whole_pages = (offset >= 0) & (offset % PAGE_BYTES == 0) & (end % PAGE_BYTES == 0)
    found = np.select([existing <= 0, cached >= existing, cached == 0], [PAST_END, CACHED, NOT_CACHED], PARTLY)
    # A write of whole pages none of which are cached reads nothing first: like new pages.
    found[writes & (found == NOT_CACHED) & whole_pages] = NEW_PAGES
    verdict[sampled] = found
    return verdict


class OpsInOrder:
    """What the ops before an op decide of it, carried from chunk to chunk of Job.ops (in order:
    by process, then start): its kernel verdict (a read in a read-ahead run), its memory layout
    (its thread's previous buffer again, or another) and whether its buffer is fresh (the first
    use of the address by its thread). Its state: per (process, file) the end of the last read
    and whether its run found pages not cached, per (process, thread) the last buffer address,
    and per thread of the last process the addresses it used."""

    def __init__(self):
        self.read_end = Carried(np.int64)
        self.run_cold = Carried(np.bool_)
        self.last_address = Carried(np.uint64)
        self.used = {}      # per thread of the last process (_thread_keys), the addresses it used, sorted

    def facts(self, ops):
        """(verdict, layouts, fresh) of each op: the kernel's verdict (KERNEL_STATES code;
        NOT_SAMPLED without a sample and for O_DIRECT ops, whose pages the page cache does not
        hold), the memory layout (models/causes.py code) and whether its buffer is fresh."""
        verdict = kernel_verdicts(ops)
        verdict[self._read_ahead(ops, verdict)] = READ_AHEAD
        verdict[(op_column(ops, "flags") & Flag.DIRECT) != 0] = NOT_SAMPLED
        return verdict, self._layouts(ops), self._fresh(ops, verdict >= 0)

    def _read_ahead(self, ops, verdict):
        """The reads found cached that continue (at the offset where the previous read of their
        process and file ended) a sequential run of reads in which an earlier sample found pages
        not cached or partly cached: the kernel's read-ahead of that run put their pages there."""
        reads = np.flatnonzero((ops["direction"] == READ) & (ops["offset"] >= 0))
        marked = np.zeros(len(verdict), bool)
        if not len(reads):
            return marked
        pair = ops["process"][reads].astype(np.int64) << 32 | ops["file"][reads].astype(np.int64)
        order = stable_order(pair)     # a chunk's rows are in start order per process
        reads, pair = reads[order], pair[order]
        offset, end = ops["offset"][reads], ops["offset"][reads] + ops["size"][reads]
        first = run_starts(pair)
        previous_end = np.empty(len(reads), np.int64)
        previous_end[1:] = end[:-1]
        previous_end[first] = self.read_end.get(pair[first], -1)
        continues = (offset == previous_end) & (previous_end >= 0)
        run_start = np.flatnonzero(~continues)
        run = np.cumsum(~continues) - 1
        cold = np.isin(verdict[reads], [NOT_CACHED, PARTLY]).astype(np.int64)
        # a run that goes on from the chunk before starts with what it found there
        cold[first & continues] += self.run_cold.get(pair[first & continues], False)
        cold_so_far = np.cumsum(cold)
        if len(run_start):
            cold_before = cold_so_far - cold - (cold_so_far - cold)[run_start][run]
        else:     # every read goes on from the chunk before, in one run
            cold_before = cold_so_far - cold
        marked[reads[continues & (cold_before > 0) & (verdict[reads] == CACHED)]] = True
        last = run_ends(pair)
        self.read_end.set(pair[last], end[last])
        self.run_cold.set(pair[last], cold_before[last] + cold[last] > 0)
        return marked

    def _layouts(self, ops):
        """memory_layout_codes of the chunk, the first op of each thread here off0 where its
        address is the one its thread used last in the chunks before."""
        buffer = ops["buffer"]
        layouts = memory_layout_codes(buffer, ops["tid"], ops["process"])
        has_address = np.flatnonzero(buffer != 0)
        if not len(has_address):
            return layouts
        thread = _thread_keys(ops["process"][has_address], ops["tid"][has_address])
        if thread[0] == thread[-1] and np.all(thread == thread[0]):
            threads, first, last = thread[:1], np.zeros(1, np.intp), np.array([len(thread) - 1])
        else:
            threads, first = np.unique(thread, return_index=True)
            last = len(thread) - 1 - np.unique(thread[::-1], return_index=True)[1]
        first_op = has_address[first]
        reused = self.last_address.get(threads, 0) == buffer[first_op]
        layouts[first_op[reused]] -= LAYOUTS.index("rnd") - LAYOUTS.index("off0")
        self.last_address.set(threads, buffer[has_address[last]])
        return layouts

    def _fresh(self, ops, asked):
        """Of the ops in `asked` (a mask), those whose user buffer the call may have faulted in,
        so that their duration holds page faults as well as the copy: the recorder found the
        buffer not all in memory (pc_buffer_faulted), or the op is the first of its thread into
        that address (memory only allocated, or read but never written, is faulted in by the
        first call that writes into it: the zero page's copy-on-write, which mincore counts as
        in memory)."""
        fresh = asked & (op_column(ops, "pc_buffer_faulted") == 1)
        buffer = ops["buffer"]
        used = np.flatnonzero(buffer != 0)
        if not len(used):
            return fresh
        thread = _thread_keys(ops["process"][used], ops["tid"][used])
        candidate = asked[used] & ~fresh[used]
        for key, rows in _rows_by_thread(thread):
            addresses, first = _first_uses(buffer[used[rows]])
            before = self.used.get(key, _NO_ADDRESSES)
            known = _sorted_contains(before, addresses)
            new = rows[first[~known]]
            fresh[used[new[candidate[new]]]] = True
            if not known.all():
                self.used[key] = np.sort(np.concatenate([before, addresses[~known]]))
        last_process = int(thread[-1]) >> 32    # a process's addresses are its own
        self.used = {key: seen for key, seen in self.used.items() if key >> 32 == last_process}
        return fresh


_NO_ADDRESSES = np.zeros(0, np.uint64)


def _thread_keys(process, tid):
    """One int64 per (process, thread): the process above the thread id's 32 bits."""
    return process.astype(np.int64) << 32 | tid.astype(np.int64)


def _rows_by_thread(thread):
    """(key, its rows in order) of each thread key; one thread at once where all are one."""
    if thread[0] == thread[-1] and np.all(thread == thread[0]):
        yield int(thread[0]), np.arange(len(thread))
        return
    order = stable_order(thread)
    starts = np.flatnonzero(run_starts(thread[order]))
    for start, stop in zip(starts, np.r_[starts[1:], len(order)]):
        yield int(thread[order[start]]), order[start:stop]


def _first_uses(addresses):
    """(the distinct addresses, sorted; the position of each one's first use)."""
    if addresses[0] == addresses[-1] and np.all(addresses == addresses[0]):
        return addresses[:1], np.zeros(1, np.intp)
    order = np.argsort(addresses, kind="stable")
    starts = run_starts(addresses[order])
    return addresses[order][starts], order[starts]


def _sorted_contains(sorted_values, values):
    """Per value, whether sorted_values (sorted, distinct) holds it."""
    at = np.searchsorted(sorted_values, values)
    inside = at < len(sorted_values)
    inside[inside] = sorted_values[at[inside]] == values[inside]
    return inside


class InferredVerdicts:
    """Per (process, file, direction), the verdicts of its sampled ops, a pass: where all of
    them (at least MIN_SAMPLES) agree, the ops not sampled there are judged by them."""
    STATES = (CACHED, NEW_PAGES, PAST_END)

    def __init__(self, processes, files):
        self.files = max(files, 1)
        self.counts = Sums(("sampled",) + tuple(KERNEL_STATES[state] for state in self.STATES),
                           max(processes, 1) * self.files * len(DIRECTIONS))

    def group(self, ops):
        return (ops["process"].astype(np.int64) * self.files + ops["file"]) * len(DIRECTIONS) + ops["direction"]

    def add(self, ops, verdict):
        sampled = verdict >= 0
        self.counts.add(self.group(ops)[sampled],
                        {"sampled": 1.0, **{KERNEL_STATES[state]: verdict[sampled] == state for state in self.STATES}})

    def merge(self, later):
        self.counts.merge(later.counts)

    def result(self):
        samples = self.counts.sums["sampled"]
        agreed = np.full(len(samples), NOT_SAMPLED, np.int8)
        for state in self.STATES:
            agreed[(self.counts.sums[KERNEL_STATES[state]] == samples) & (samples >= MIN_SAMPLES)] = state
        known = Carried(np.int8)
        known.set(self.counts.keys, agreed)
        return AgreedVerdicts(self, known)


class AgreedVerdicts:
    """The verdict of each (process, file, direction) all of whose sampled ops agree."""

    def __init__(self, inferred, agreed):
        self.inferred, self.agreed = inferred, agreed

    def judged(self, ops, verdict):
        """Per op the verdict it is judged by: its own where it was sampled, else its group's
        where all sampled ops there agree (NOT_SAMPLED elsewhere and for O_DIRECT ops)."""
        agreed = self.agreed.get(self.inferred.group(ops), NOT_SAMPLED)
        judged = np.where(verdict >= 0, verdict, agreed).astype(np.int8)
        judged[(op_column(ops, "flags") & Flag.DIRECT) != 0] = NOT_SAMPLED
        return judged


def overridden_classes(classes, verdict, direction, codes):
    """The row class of each op once the kernel's verdict is applied (docstring of the module).
    codes: {name: code} of the row classes."""
    storage_slow = np.isin(classes, [codes["uncached"], codes["slow"]])
    modelled = np.isin(classes, [codes["memcpy"], codes["cached"], codes["uncached"], codes["slow"]])
    out = classes.copy()
    reads, writes = direction == READ, direction == WRITE
    out[modelled & reads & (verdict == NOT_CACHED) & ~storage_slow] = codes["uncached"]
    out[storage_slow & (verdict == CACHED) & (reads | writes)] = codes["stall"]
    out[storage_slow & writes & np.isin(verdict, [NEW_PAGES, PAST_END])] = codes["allocation"]
    return out


def agreement(classes, verdict, direction, modelled, codes, size_bytes, duration_s, fresh_buffer):
    """How the classes (before the kernel's word) and the kernel's verdicts agree on the sampled
    ops the model covers: per direction a confusion table (kernel verdict x class, counts), and
    for the reads the share where both say cached or both say not cached, in all and outside
    the band of durations that cannot tell (overlap_bands) and of the reads into a fresh buffer
    (OpsInOrder: their time holds the buffer's page faults); trusted when the share outside
    those is at least TRUSTED_AGREEMENT."""
    model_classes = ("memcpy", "cached", "uncached", "slow")
    sampled = np.zeros(len(classes), bool)
    sampled[modelled] = True
    sampled &= verdict >= 0
    tables = {}
    for name, d in (("read", READ), ("write", WRITE)):
        here = sampled & (direction == d)
        if here.any():
            tables[name] = {state: {cls: int(np.count_nonzero(here & (verdict == s) & (classes == codes[cls])))
                                    for cls in model_classes}
                            for s, state in enumerate(KERNEL_STATES)}
    reads = sampled & (direction == READ)
    model_cached = np.isin(classes, [codes["memcpy"], codes["cached"]])
    decided = reads & np.isin(verdict, [CACHED, NOT_CACHED])
    agreeing = decided & (model_cached == (verdict == CACHED))
    fresh = decided & fresh_buffer
    bands, in_band = overlap_bands(size_bytes, duration_s, verdict, decided & ~fresh)
    outside = decided & ~in_band & ~fresh
    decided_n, outside_n = int(np.count_nonzero(decided)), int(np.count_nonzero(outside))
    share = float(np.count_nonzero(agreeing) / decided_n) if decided_n else None
    share_outside = float(np.count_nonzero(agreeing & outside) / outside_n) if outside_n else None
    return {"sampled_ops": int(np.count_nonzero(sampled)), "decided_reads": decided_n,
            "read_agreement": share, "reads_in_band": int(np.count_nonzero(in_band)),
            "reads_fresh_buffer": int(np.count_nonzero(fresh)),
            "read_agreement_outside_band": share_outside, "bands": bands,
            "trusted": share_outside is None or share_outside >= TRUSTED_AGREEMENT, "tables": tables}


def overlap_bands(size_bytes, duration_s, verdict, decided):
    """Where durations cannot tell cached from not cached: per power-of-two size bin of the
    decided reads (sampled, the kernel saying cached or not cached) that has both, the band from
    the BAND_QUANTILE of the not-cached reads' durations to the (1 - BAND_QUANTILE) one of the
    cached reads', when the first is below the second; from 4 KiB up per byte, as the job's own
    lines (report/own_cached.py). ([{size_low, size_high, low_s, high_s, reads}] with the band's
    seconds at size_low, the mask of the decided reads inside a band)."""
    in_band = np.zeros(len(verdict), bool)
    chosen = np.flatnonzero(decided)
    bins = size_bins(size_bytes[chosen])
    normalised = duration_s[chosen] / per_size(size_bytes[chosen])
    bands = []
    for size_bin in distinct(bins):
        here = bins == size_bin
        cached, uncached = here & (verdict[chosen] == CACHED), here & (verdict[chosen] == NOT_CACHED)
        if not cached.any() or not uncached.any():
            continue
        low = float(np.percentile(normalised[uncached], 100 * BAND_QUANTILE))
        high = float(np.percentile(normalised[cached], 100 * (1 - BAND_QUANTILE)))
        if low >= high:
            continue
        inside = here & (normalised >= low) & (normalised <= high)
        in_band[chosen[inside]] = True
        size_low = 1 << int(size_bin)
        scale = float(per_size(np.array([size_low]))[0])
        bands.append({"size_low": size_low, "size_high": (size_low << 1) - 1, "low_s": low * scale,
                      "high_s": high * scale, "reads": int(np.count_nonzero(inside))})
    return bands, in_band
