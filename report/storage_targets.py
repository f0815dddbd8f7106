"""Storage targets: the servers a parallel file system spreads each file over (Lustre's OSTs, from
Darshan's LUSTRE records). The I/O time per byte of the files on each target tells a slow target
(a failing disk, an overloaded server) from a slow job: the job's files on the other targets went
faster (docs/assessment.md, "Storage targets")."""
import numpy as np

MIB = 1 << 20
SLOW_TARGET_FACTOR = 3.0    # slow: its files' median time per MiB over the job's median time per MiB
TARGET_MIN_BYTES = MIB      # files that moved less are left out: their time is their calls', not bandwidth
TARGET_MIN_FILES = 2        # files on a target for its median to say something of the target
TARGETS_MIN = 3             # targets holding such files for the job's median to be a reference
SLOW_TARGET_FILES_NAMED = 5


def storage_targets(job, per_file):
    """The job's files on each storage target, against the job's median time per MiB. None when
    no file that moved at least TARGET_MIN_BYTES has its targets known; else `targets` (how many
    hold such files), `files` (those files), `median_s_per_mib` (the median of their I/O time per
    MiB) and `slow`, most excess first: each target whose files' median time per MiB is at least
    SLOW_TARGET_FACTOR times the job's, with TARGET_MIN_FILES files or more, among TARGETS_MIN
    targets or more: `target`, `files`, `bytes` and `seconds` (its part of its files' I/O: a file
    striped over k targets gives each 1/k), `s_per_mib` (its files' median), `excess_s` (its part
    of its files' time beyond their bytes at the job's median time per MiB) and `names` (its
    files with most excess, up to SLOW_TARGET_FILES_NAMED: `name`, `ops`, `seconds`)."""
    m = measured(job, per_file)
    if m is None:
        return None
    chosen, seconds, nbytes, excess = m["chosen"], m["seconds"], m["nbytes"], m["excess"]
    row_file, row_target, share, targets, count = m["row_file"], m["row_target"], m["share"], m["targets"], m["count"]
    slow, medians, target_excess, median = m["slow"], m["medians"], m["target_excess"], m["median"]
    rows = []
    for t in slow[np.argsort(-target_excess[slow], kind="stable")].tolist():
        on = row_target == targets[t]
        files = row_file[on][np.argsort(-excess[row_file[on]], kind="stable")][:SLOW_TARGET_FILES_NAMED]
        rows.append({"target": int(targets[t]), "files": int(count[t]),
                     "bytes": int(np.sum(nbytes[row_file[on]] * share[on])),
                     "seconds": float(np.sum(seconds[row_file[on]] * share[on])),
                     "s_per_mib": float(medians[t]), "excess_s": float(target_excess[t]),
                     "names": [{"name": job.files[chosen[f]].name, "ops": int(per_file["ops"][chosen[f]]),
                                "seconds": float(seconds[f])} for f in files.tolist()]})
    return {"targets": len(targets), "files": len(chosen), "median_s_per_mib": median, "slow": rows}


def measured(job, per_file):
    """The arrays storage_targets reads: the chosen files (index into Job.files), their seconds,
    bytes and excess, one row per (file, target) with its share of the file, the targets, their
    file counts, medians and excess, the slow ones (indices into targets); None when no file
    qualifies."""
    chosen = np.array([i for i, f in enumerate(job.files) if f.osts and per_file["bytes"][i] >= TARGET_MIN_BYTES
                       and per_file["seconds"][i] > 0], np.int64)
    if not len(chosen):
        return None
    seconds, nbytes = per_file["seconds"][chosen], per_file["bytes"][chosen]
    stripes = np.array([len(job.files[i].osts) for i in chosen], np.int64)
    rate = seconds / (nbytes / MIB)
    median = float(np.median(rate))
    excess = np.maximum(seconds - nbytes / MIB * median, 0.0)
    row_file = np.repeat(np.arange(len(chosen)), stripes)
    row_target = np.concatenate([np.asarray(job.files[i].osts, np.int64) for i in chosen])
    share = 1.0 / stripes[row_file]
    targets, inverse = np.unique(row_target, return_inverse=True)
    count = np.bincount(inverse, minlength=len(targets))
    medians = group_medians(inverse, rate[row_file], len(targets))
    slow = np.flatnonzero((count >= TARGET_MIN_FILES) & (medians >= SLOW_TARGET_FACTOR * median)) \
        if len(targets) >= TARGETS_MIN else np.zeros(0, np.int64)
    return {"chosen": chosen, "seconds": seconds, "nbytes": nbytes, "excess": excess, "median": median,
            "row_file": row_file, "row_target": row_target, "share": share, "targets": targets,
            "inverse": inverse, "count": count, "medians": medians, "slow": slow,
            "target_excess": np.bincount(inverse, excess[row_file] * share, len(targets))}


def excess_on_slow_targets(job, per_file):
    """Per file (an array over Job.files), its excess time on the slow targets: the parts
    storage_targets' `excess_s` of the slow targets add up."""
    out = np.zeros(len(job.files))
    m = measured(job, per_file)
    if m is None or not len(m["slow"]):
        return out
    on_slow = np.isin(m["inverse"], m["slow"])
    rows = m["row_file"][on_slow]
    np.add.at(out, m["chosen"][rows], m["excess"][rows] * m["share"][on_slow])
    return out


def group_medians(group, values, groups):
    """The median of values per group (0 … groups-1; NaN for a group without values)."""
    order = np.lexsort((values, group))
    counts = np.bincount(group, minlength=groups)
    starts = np.concatenate(([0], np.cumsum(counts)[:-1]))
    sorted_values = values[order]
    low = sorted_values[np.minimum(starts + (counts - 1) // 2, len(values) - 1)]
    high = sorted_values[np.minimum(starts + counts // 2, len(values) - 1)]
    return np.where(counts > 0, (low + high) / 2, np.nan)
