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

from ioassess.inputs.job import DIRECTIONS, READ, WRITE, op_column

from .own_cached import per_size, size_bins

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
    """Per op, the code of KERNEL_STATES the kernel's sample gives, NOT_SAMPLED without one."""
    pages = op_column(ops, "pc_pages").astype(np.int64)
    cached = op_column(ops, "pc_cached").astype(np.int64)
    new = np.maximum(op_column(ops, "pc_new_pages").astype(np.int64), 0)
    existing = pages - np.where(ops["direction"] == WRITE, new, 0)
    whole_pages = (ops["offset"] >= 0) & (ops["offset"] % PAGE_BYTES == 0) & \
        ((ops["offset"] + ops["size"]) % PAGE_BYTES == 0)
    verdict = np.select(
        [pages <= 0, existing <= 0, cached >= existing, cached == 0],
        [NOT_SAMPLED, PAST_END, CACHED, NOT_CACHED], PARTLY).astype(np.int8)
    # A write of whole pages none of which are cached reads nothing first: like new pages.
    verdict[(ops["direction"] == WRITE) & (verdict == NOT_CACHED) & whole_pages] = NEW_PAGES
    verdict[read_ahead(ops, verdict)] = READ_AHEAD
    return verdict


def read_ahead(ops, verdict):
    """The reads found cached that continue (at the offset where the previous read of their
    process and file ended) a sequential run of reads in which an earlier sample found pages not
    cached or partly cached: the kernel's read-ahead of that run put their pages there."""
    reads = np.flatnonzero((ops["direction"] == READ) & (ops["offset"] >= 0))
    marked = np.zeros(len(verdict), bool)
    if not len(reads):
        return marked
    reads = reads[np.lexsort((ops["start_s"][reads], ops["file"][reads], ops["process"][reads]))]
    process, file, offset = ops["process"][reads], ops["file"][reads], ops["offset"][reads]
    continues = np.zeros(len(reads), bool)
    continues[1:] = (process[1:] == process[:-1]) & (file[1:] == file[:-1]) & \
        (offset[1:] == offset[:-1] + ops["size"][reads][:-1])
    run_start = np.flatnonzero(~continues)
    run = np.cumsum(~continues) - 1
    cold = np.isin(verdict[reads], [NOT_CACHED, PARTLY]).astype(np.int64)
    cold_so_far = np.cumsum(cold)
    cold_before = cold_so_far - cold - (cold_so_far - cold)[run_start][run]
    marked[reads[continues & (cold_before > 0) & (verdict[reads] == CACHED)]] = True
    return marked


def inferred_verdicts(ops, verdict):
    """Per op the verdict of the sampled ops of its (process, file, direction) where all of them
    (at least MIN_SAMPLES) agree, NOT_SAMPLED elsewhere; sampled ops keep their own."""
    direction = ops["direction"].astype(np.int64)
    files = int(ops["file"].max(initial=0)) + 1
    group = (ops["process"].astype(np.int64) * files + ops["file"]) * len(DIRECTIONS) + direction
    groups, of_op = np.unique(group, return_inverse=True)
    sampled = verdict >= 0
    samples = np.bincount(of_op[sampled], minlength=len(groups))
    agreed = np.full(len(groups), NOT_SAMPLED, np.int8)
    for state in (CACHED, NEW_PAGES, PAST_END):
        all_of_them = np.bincount(of_op[verdict == state], minlength=len(groups)) == samples
        agreed[all_of_them & (samples >= MIN_SAMPLES)] = state
    return np.where(sampled, verdict, agreed[of_op]).astype(np.int8)


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
    (fresh_buffers: their time holds the buffer's page faults); trusted when the share outside
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


def fresh_buffers(ops, asked):
    """Of the ops in `asked` (a mask), those whose user buffer the call may have faulted in, so
    that their duration holds page faults as well as the copy: the recorder found the buffer
    not all in memory (pc_buffer_faulted), or the op is the first of its thread into that
    address (memory only allocated, or read but never written, is faulted in by the first call
    that writes into it: the zero page's copy-on-write, which mincore counts as in memory)."""
    fresh = asked & (op_column(ops, "pc_buffer_faulted") == 1)
    buffer = ops["buffer"]
    candidates = np.flatnonzero(asked & (buffer != 0) & ~fresh)
    if not len(candidates):
        return fresh
    near = np.flatnonzero(np.isin(buffer, np.unique(buffer[candidates])))
    # Ops are in process and start order: within (process, tid, address) the lowest index is
    # the first use.
    near = near[np.lexsort((near, buffer[near], ops["tid"][near], ops["process"][near]))]
    first = np.ones(len(near), bool)
    first[1:] = (ops["process"][near][1:] != ops["process"][near][:-1]) | \
        (ops["tid"][near][1:] != ops["tid"][near][:-1]) | (buffer[near][1:] != buffer[near][:-1])
    first_use = np.zeros(len(buffer), bool)
    first_use[near[first]] = True
    fresh[candidates] |= first_use[candidates]
    return fresh


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
    for size_bin in np.unique(bins):
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
