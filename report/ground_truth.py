"""The kernel's word on the page cache (the recorder's cachestat samples) in the assessment.

For a sampled op the kernel said, just before the call, how many of the op's pages were in the
page cache (and, for a write, how many lay past the end of the file). Where that settles the
cause it overrides the model (docs/assessment.md, "The kernel's word"):

- a read of pages that were all cached was served from memory: classed cached when the model
  says so, and a stall (CPU, preemption, page faults: not storage) when it took as long as
  storage I/O;
- a read of pages none of which were cached needed the storage: classed uncached;
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

# The kernel's verdict of an op (codes of KERNEL_STATES; NOT_SAMPLED: no sample).
NOT_SAMPLED = -1
# "new pages": whole pages of which none was cached (a write reads nothing first); "past the end":
# a write only at or past the end of the file (an append). Both go into new page-cache memory.
KERNEL_STATES = ("cached", "partly cached", "not cached", "new pages", "past the end")
CACHED, PARTLY, NOT_CACHED, NEW_PAGES, PAST_END = range(len(KERNEL_STATES))
PAGE_BYTES = 4096
# Sampled ops of one process, file and direction that must all agree before unsampled ones
# there are judged by them.
MIN_SAMPLES = 4
# The model and the kernel agree on cached vs not cached for at least this share of the
# sampled reads, or the report says the model's classes are not to be trusted for this job.
TRUSTED_AGREEMENT = 0.9


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
    return verdict


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


def agreement(classes, verdict, direction, modelled, codes):
    """How the model's classes and the kernel's verdicts agree on the sampled ops the model
    covers: per direction a confusion table (kernel verdict x model class, counts), and for the
    reads the share where both say cached or both say not cached."""
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
    decided_n = int(np.count_nonzero(decided))
    share = float(np.count_nonzero(agreeing) / decided_n) if decided_n else None
    return {"sampled_ops": int(np.count_nonzero(sampled)), "decided_reads": decided_n,
            "read_agreement": share, "trusted": share is None or share >= TRUSTED_AGREEMENT,
            "tables": tables}
