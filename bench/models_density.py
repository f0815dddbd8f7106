"""Time density_log10 on 10^7 durations (target: at most 0.5 s): median of RUNS runs.

    python3 bench/models_density.py [--count 10000000] [--runs 5]    (times the installed package)

The durations are a fixed-seed mixture like real ones (cached, uncached, a congestion tail), so
every run sees the same data. Also prints the time of find_clusters on the result.
"""
import argparse
import statistics
import time

import numpy as np

from ioassess.models.density import density_log10, find_clusters


def durations(count):
    rng = np.random.default_rng(2015)
    cached = rng.lognormal(np.log(2e-5), 0.2, count * 7 // 10)
    uncached = rng.lognormal(np.log(5e-4), 0.4, count * 29 // 100)
    tail = 5e-3 * rng.pareto(1.5, count - cached.size - uncached.size) + 5e-3
    return np.concatenate([cached, uncached, tail])


def seconds(function, *args):
    start = time.perf_counter()
    result = function(*args)
    return time.perf_counter() - start, result


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=10_000_000)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()

    data = durations(args.count)
    density_times, cluster_times = [], []
    for _ in range(args.runs):
        elapsed, density = seconds(density_log10, data)
        density_times.append(elapsed)
        cluster_times.append(seconds(find_clusters, density)[0])
    print(f"density_log10 of {args.count} durations: median {statistics.median(density_times):.3f} s "
          f"(runs: {', '.join(f'{t:.3f}' for t in density_times)})")
    print(f"find_clusters: median {statistics.median(cluster_times) * 1e3:.2f} ms")


if __name__ == "__main__":
    main()
