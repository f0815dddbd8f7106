"""Durations on a fixed logarithmic scale: bin round(log(seconds / min_s) / log(ratio)), the
durations outside the scale in its first or last bin. Counts on one scale add up, so quantiles
read from summed counts are exact up to the bin's width, whatever is summed (hours of a probe's
ops, the jobs of a fleet): no "p99 of p99s"."""
import dataclasses
import math

import numpy as np


@dataclasses.dataclass(frozen=True)
class LogScale:
    min_s: float     # the middle (in log) of bin 0
    ratio: float     # of a bin's middle to the one before
    bins: int

    def bins_of(self, seconds):
        """The bin of each duration (uint16)."""
        with np.errstate(divide="ignore", invalid="ignore"):
            position = np.round(np.log(np.asarray(seconds, dtype=np.float64) / self.min_s) / math.log(self.ratio))
        return np.clip(np.nan_to_num(position, nan=0.0), 0, self.bins - 1).astype(np.uint16)

    def seconds_of(self, bins):
        """The duration at the middle (in log) of each bin."""
        return self.min_s * self.ratio ** np.asarray(bins, dtype=np.float64)

    def as_dict(self):
        return {"min_s": self.min_s, "ratio": self.ratio, "bins": self.bins}
