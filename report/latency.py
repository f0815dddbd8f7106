"""The job's op durations as histograms on one fixed log scale, per op kind and file system
(docs/assessment.md, `latency`): counts that add up across jobs, so a site's percentiles over
many jobs are sums of these, not percentiles of percentiles (docs/fleet.md)."""
import numpy as np

from ioassess.inputs.job import DIRECTIONS, META
from ioassess.models.log_scale import LogScale

from .classify import IO_LAYERS

# Bins a fourth of an octave wide (a quantile read from them is within 9 % of the duration's)
# from 0.1 us to about 3 hours: few enough bins that a job's histograms stay small.
LATENCY_SCALE = LogScale(min_s=1e-7, ratio=2 ** 0.25, bins=147)


def latency_histograms(job, per_op):
    """The `latency` section: null without ops known one by one; else the scale and, per (op
    kind, file system) with ops, `ops`, `seconds` and the non-empty `bins` with their `counts`.
    The ops: the I/O ops of per_op["is_io"] and the POSIX and STDIO metadata calls."""
    ops = job.ops
    chosen = per_op["is_io"] | ((ops["direction"] == META) & np.isin(ops["layer"], IO_LAYERS))
    if not chosen.any():
        return None
    mounts = sorted({(f.mount_point, f.fs_type) for f in job.files})
    mount_code = {mount: code for code, mount in enumerate(mounts)}
    file_mount = np.array([mount_code[(f.mount_point, f.fs_type)] for f in job.files], dtype=np.int64)
    kind = ops["direction"][chosen].astype(np.int64)
    mount = file_mount[ops["file"][chosen]]
    seconds = ops["duration_s"][chosen]
    bins = LATENCY_SCALE.bins_of(seconds).astype(np.int64)
    group = kind * len(mounts) + mount
    histograms = []
    for code in np.unique(group):
        mine = group == code
        present, counts = np.unique(bins[mine], return_counts=True)
        mount_point, fs_type = mounts[code % len(mounts)]
        histograms.append({"kind": DIRECTIONS[code // len(mounts)], "mount_point": mount_point, "fs_type": fs_type,
                           "ops": int(np.count_nonzero(mine)), "seconds": float(seconds[mine].sum()),
                           "bins": present.tolist(), "counts": counts.tolist()})
    return {"scale": LATENCY_SCALE.as_dict(), "histograms": histograms}
