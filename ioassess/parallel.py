"""Work on a job's processes side by side: the runs of a job go to processes forked from this
one, which inherit the job and send back only what each run gives (the assessment's passes, a
trace file's scan)."""
import os

import numpy as np

from .arrays import distinct
# Jobs of fewer ops are read in this process alone: starting workers would cost more.
PARALLEL_OPS = 1 << 21
# Runs of processes per worker: runs of about one size each, so that workers finish together.
RUNS_PER_WORKER = 4


def workers_here():
    """The CPUs this process may run on."""
    return len(os.sched_getaffinity(0))


def process_runs(ops_per_process, workers=None):
    """(workers, runs): the workers to read the job's ops (None: the CPUs here when the job has
    PARALLEL_OPS ops or more, else one) and consecutive runs of its processes, (first, stop)
    each, of about as many ops, RUNS_PER_WORKER per worker."""
    ops_per_process = np.asarray(ops_per_process)
    if workers is None:
        workers = workers_here() if ops_per_process.sum() >= PARALLEL_OPS else 1
    runs = RUNS_PER_WORKER * workers if workers > 1 else 1
    cumulative = np.cumsum(ops_per_process)
    total = int(cumulative[-1]) if len(cumulative) else 0
    cuts = np.searchsorted(cumulative, np.arange(1, runs) * total / runs, side="right")
    edges = distinct(np.concatenate([[0], cuts, [len(ops_per_process)]]))
    return workers, [(int(a), int(b)) for a, b in zip(edges[:-1], edges[1:])] or [(0, 0)]


# What a worker forked by in_parallel runs (a closure cannot be pickled; a fork inherits it).
_WORK = None


def _work(item):
    return _WORK(item)


def in_parallel(work, items, workers, done=None):
    """[work(item) for item in items], in order: with more than one worker, by processes forked
    from this one (what work gives must pickle). done(items finished, items) is called as items
    finish."""
    return list(results_in_parallel(work, items, workers, done))


def results_in_parallel(work, items, workers, done=None):
    """work(item) for each item, given in order as they come (a reducer holds one at a time),
    as in_parallel does them."""
    global _WORK
    if workers <= 1 or len(items) <= 1:
        for finished, item in enumerate(items, 1):
            yield work(item)
            if done:
                done(finished, len(items))
        return
    import multiprocessing     # here: most reports start no worker, and the import takes 5 ms
    _WORK = work
    try:
        with multiprocessing.get_context("fork").Pool(min(workers, len(items))) as pool:
            for finished, result in enumerate(pool.imap(_work, items), 1):
                yield result
                if done:
                    done(finished, len(items))
    finally:
        _WORK = None
