"""Density clustering of I/O durations (Kunkel 2015, sections 3, 4 and 6).

The density is R's density() of log10(duration) (R 4.2.2, Gaussian kernel, nrd0 bandwidth times
adjust, default 2), reproduced step by step: linear binning onto 2n points, FFT convolution with
the kernel sampled the way R samples it, linear interpolation back to the output grid. 10^7
durations take about 0.2 s (bench/models_density.py), mostly the quartiles and the binning.

Clusters are the local maxima of the density at least PEAK_FRACTION of the global maximum high;
splits are the lowest points between consecutive clusters; the outlier cut-off is where the
density, walking right from the last cluster, first falls below 0.05 of that cluster's height.
"""
from dataclasses import dataclass

import numpy as np
# Imported now, not on numpy's first use: a lazy import fails when the installation stops being
# readable midway (and a Ctrl-C inside one can leave numpy half made).
from numpy.fft import irfft, rfft

# A local maximum counts as a cluster only if it reaches this fraction of the global maximum.
# Counting every maximum (the paper's literal rule) lets a lone far outlier form the "last
# cluster", and the cut-off then lies beyond it, so nothing is ever purged.
PEAK_FRACTION = 0.05

_R_MIN_GRID = 512  # density() never works on fewer grid points than this.
_KERNEL_REACH_BW = 4  # R pads the binning grid by 4 bandwidths on each side.


@dataclass(frozen=True, eq=False)
class Density:
    """R's density() of log10 durations: grid x (log10 s), density y, bandwidth, observations."""

    x: np.ndarray
    y: np.ndarray
    bandwidth: float
    n_obs: int


@dataclass(frozen=True, eq=False)
class Clusters:
    """Counted maxima (ascending x), the split between each consecutive pair, the outlier
    cut-off and the global mode, all in log10 seconds (peaks_y in density units)."""

    peaks_x: np.ndarray
    peaks_y: np.ndarray
    splits_x: np.ndarray
    cutoff_x: float
    mode_x: float


def density_log10(durations_s, adjust=2.0, n=512, cut=3.0):
    """Gaussian KDE of log10(durations_s) exactly as R 4.2.2's density(log10(d), adjust=adjust,
    n=n, cut=cut) computes it. Durations must be positive and finite (ValueError otherwise)."""
    if not (np.isfinite(adjust) and adjust > 0):
        raise ValueError(f"adjust must be positive and finite, got {adjust}")
    if not np.isfinite(cut) or cut < 0:
        raise ValueError(f"cut must be non-negative and finite, got {cut}")
    if n < 2:
        raise ValueError(f"n must be at least 2, got {n}")
    # A private array: the bandwidth reorders it and the binning overwrites it, saving copies.
    work = _log10_durations(durations_s)
    n_obs = work.size
    x_min, x_max = float(work.min()), float(work.max())
    bandwidth = adjust * _bandwidth_nrd0(work, x_min, x_max)
    grid_from, grid_to = x_min - cut * bandwidth, x_max + cut * bandwidth

    n_inner = _r_inner_grid_size(n)
    lo = grid_from - _KERNEL_REACH_BW * bandwidth
    up = grid_to + _KERNEL_REACH_BW * bandwidth
    binned = _linear_binning(work, lo, up, n_inner)
    smoothed = _convolve_gaussian(binned, lo, up, bandwidth)[:n_inner]
    np.maximum(smoothed, 0.0, out=smoothed)

    grid = np.linspace(grid_from, grid_to, n)
    y = np.interp(grid, np.linspace(lo, up, n_inner), smoothed)
    return Density(x=_read_only(grid), y=_read_only(y), bandwidth=float(bandwidth), n_obs=n_obs)


def _bandwidth_nrd0(x, x_min, x_max):
    """R's bw.nrd0(x): 0.9 * min(sd, IQR/1.34) * n^-0.2, falling back to sd, then |x[1]|, then 1
    when that spread is 0. Partially sorts x in place. R refuses a single value; here it is
    treated like all-equal values (no spread)."""
    # Equal values are special-cased: numpy's mean of them can be off by an ulp, giving an sd
    # of ~1e-15 where R (long double sums) gets exactly 0 and takes the |x[1]| fallback.
    if x_min == x_max:
        sd = 0.0
        spread = 0.0
    else:
        sd = float(np.std(x, ddof=1))
        q25, q75 = _quantiles_type7_in_place(x, (0.25, 0.75))
        spread = min(sd, (q75 - q25) / 1.34)
    if spread == 0.0:
        spread = sd or abs(x_min) or 1.0  # sd is 0 only when all values equal, so x[1] is x_min
    return 0.9 * spread * x.size ** -0.2


def find_clusters(density, peak_fraction=PEAK_FRACTION, cutoff_fraction=0.05):
    """Clusters of a Density: local maxima with y >= peak_fraction * global maximum; splits at
    the lowest density between consecutive ones; cut-off at the first grid point right of the
    last counted maximum where y < cutoff_fraction * its y (the grid end if there is none)."""
    x, y = density.x, density.y
    peaks = _local_maxima(y)
    peaks = peaks[y[peaks] >= peak_fraction * y.max()]
    splits = [left + int(np.argmin(y[left:right + 1])) for left, right in zip(peaks[:-1], peaks[1:])]

    last = peaks[-1]
    below = np.flatnonzero(y[last:] < cutoff_fraction * y[last])
    cutoff = last + below[0] if below.size else y.size - 1
    return Clusters(
        peaks_x=_read_only(x[peaks]),
        peaks_y=_read_only(y[peaks]),
        splits_x=_read_only(x[np.asarray(splits, dtype=np.intp)]),
        cutoff_x=float(x[cutoff]),
        mode_x=float(x[np.argmax(y)]),
    )


def assign_clusters(log10_values, clusters):
    """Cluster index 0..k-1 of each log10 value by the split points (a value equal to a split
    goes to the lower cluster), -1 for values above the outlier cut-off."""
    values = np.asarray(log10_values, dtype=np.float64)
    index = np.searchsorted(clusters.splits_x, values, side="left")
    index[values > clusters.cutoff_x] = -1
    return index


def _log10_durations(durations_s):
    durations = np.asarray(durations_s, dtype=np.float64).ravel()
    if durations.size == 0:
        raise ValueError("no durations")
    with np.errstate(divide="ignore", invalid="ignore"):
        x = np.log10(durations)
    # One pass: min and max of the log are NaN or infinite iff some duration is NaN, infinite,
    # zero or negative.
    if not (np.isfinite(x.min()) and np.isfinite(x.max())):
        bad = np.count_nonzero(~(np.isfinite(durations) & (durations > 0)))
        raise ValueError(f"durations must be positive and finite; {bad} of {durations.size} are not")
    return x


def _quantiles_type7_in_place(x, probs):
    """R's quantile(x, probs, type = 7), by partially sorting x in place."""
    positions = [(x.size - 1) * p for p in probs]
    below = [int(np.floor(h)) for h in positions]
    above = [int(np.ceil(h)) for h in positions]
    x.partition(sorted(set(below + above)))
    return [(1 - (h - b)) * x[b] + (h - b) * x[a] for h, b, a in zip(positions, below, above)]


def _r_inner_grid_size(n):
    return _R_MIN_GRID if n <= _R_MIN_GRID else 2 ** int(np.ceil(np.log2(n)))


def _linear_binning(x, lo, up, n):
    """R's BinDist: each value's weight 1/len(x) split linearly between its two neighbouring
    points of the n-point grid on [lo, up], in an array of 2n (zero padding for the FFT).
    All values lie strictly inside [lo, up] here, so R's edge cases never apply. Overwrites x."""
    position = x
    position -= lo
    position /= (up - lo) / (n - 1)
    left = position.astype(np.intp)  # floor, as position > 0
    position -= left  # now the fraction of the weight that goes to the right neighbour
    to_right = np.bincount(left, weights=position, minlength=n)
    to_left = np.bincount(left, minlength=n) - to_right
    binned = np.zeros(2 * n)
    binned[:n] = to_left
    binned[1:n + 1] += to_right
    return binned / x.size


def _convolve_gaussian(binned, lo, up, bandwidth):
    """Circular convolution with R's kernel samples. R 4.2.2 places them at
    seq(0, 2 * (up - lo), length.out = 2n), a spacing slightly wider than the binning grid's;
    it is kept to match R (R >= 4.4 changed this under old.coords = FALSE)."""
    size = binned.size
    half = size // 2
    offsets = np.linspace(0.0, 2 * (up - lo), size)
    offsets[half + 1:] = -offsets[half - 1:0:-1]
    kernel = np.exp(-0.5 * (offsets / bandwidth) ** 2) / (bandwidth * np.sqrt(2 * np.pi))
    return irfft(rfft(binned) * np.conj(rfft(kernel)), size)


def _local_maxima(y):
    """Indices of local maxima: points (or runs of equal points, by their first index) higher
    than the points on both sides; a grid end counts when higher than its one neighbour."""
    run_starts = np.flatnonzero(np.diff(y, prepend=np.nan) != 0)
    heights = np.concatenate(([-np.inf], y[run_starts], [-np.inf]))
    middle = heights[1:-1]
    return run_starts[(middle > heights[:-2]) & (middle > heights[2:])]


def _read_only(array):
    array.setflags(write=False)
    return array
