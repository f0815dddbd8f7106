"""The job's op durations as histograms on one fixed log scale, per op kind and file system
(docs/assessment.md, `latency`): counts that add up across jobs, so a site's percentiles over
many jobs are sums of these, not percentiles of percentiles (docs/fleet.md)."""
import numpy as np

from ioassess.inputs.job import DIRECTIONS, META
from ioassess.models.log_scale import LogScale

from .classify import IO_LAYERS
from .passes import Sums

# Bins a fourth of an octave wide (a quantile read from them is within 9 % of the duration's)
# from 0.1 us to about 3 hours: few enough bins that a job's histograms stay small.
LATENCY_SCALE = LogScale(min_s=1e-7, ratio=2 ** 0.25, bins=147)


class LatencyHistograms:
    """The `latency` section, a pass (report/passes.py): null without ops known one by one; else
    the scale and, per (op kind, file system) with ops, `ops`, `seconds` and the non-empty
    `bins` with their `counts`. The ops: the I/O ops of per_op["is_io"] and the POSIX and STDIO
    metadata calls."""

    def __init__(self, job):
        self.mounts = sorted({(f.mount_point, f.fs_type) for f in job.files})
        mount_code = {mount: code for code, mount in enumerate(self.mounts)}
        self.file_mount = np.array([mount_code[(f.mount_point, f.fs_type)] for f in job.files], dtype=np.int64)
        groups = len(DIRECTIONS) * max(len(self.mounts), 1)
        self.groups = Sums(("ops", "seconds"), groups)
        self.bins = Sums(("ops",), groups * LATENCY_SCALE.bins)

    def add(self, chunk):
        ops = chunk.ops
        chosen = chunk.per_op["is_io"] | ((ops["direction"] == META) & np.isin(ops["layer"], IO_LAYERS))
        group = ops["direction"][chosen].astype(np.int64) * len(self.mounts) + self.file_mount[ops["file"][chosen]]
        seconds = ops["duration_s"][chosen]
        self.groups.add(group, {"ops": 1.0, "seconds": seconds})
        self.bins.add(group * LATENCY_SCALE.bins + LATENCY_SCALE.bins_of(seconds), {"ops": 1.0})

    def merge(self, later):
        self.groups.merge(later.groups)
        self.bins.merge(later.bins)

    def result(self):
        if not len(self.groups.keys):
            return None
        bin_group, bin_of = np.divmod(self.bins.keys, LATENCY_SCALE.bins)
        histograms = []
        for code, ops, seconds in zip(self.groups.keys.tolist(), self.groups.sums["ops"], self.groups.sums["seconds"]):
            mine = bin_group == code
            mount_point, fs_type = self.mounts[code % len(self.mounts)]
            histograms.append({"kind": DIRECTIONS[code // len(self.mounts)], "mount_point": mount_point,
                               "fs_type": fs_type, "ops": int(ops), "seconds": float(seconds),
                               "bins": bin_of[mine].tolist(),
                               "counts": self.bins.sums["ops"][mine].astype(np.int64).tolist()})
        return {"scale": LATENCY_SCALE.as_dict(), "histograms": histograms}
