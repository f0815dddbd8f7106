"""Time the full tail analysis (targets: at most 50 ms for 10^4 durations, 2 s for 10^6) and, in
the same run, powerlaw.Fit(data) (its own xmin search) on the same 10^4 durations.

    python3 bench/tails.py [--runs 7] [--powerlaw-runs 3] [--no-powerlaw]   (times the installed package)

The durations are the test suite's ground truth (85 % Normal(1.0, 0.1) and 15 % Pareto with
xmin 1.3 and shape 2.5, fixed seed). One analysis is analyse_durations(): validation and sort,
the pivot search, all seven families, the EM tail fits, Vuong's test, the summary statistics and
the order statistics. Each figure is the median over its runs; the ratio is powerlaw's median
over ours at 10^4.
"""
import argparse
import statistics
import time

import numpy as np

from ioassess.models.tails import analyse_durations

TARGETS_S = {10_000: 0.050, 1_000_000: 2.0}


def durations(count, seed=2015):
    rng = np.random.default_rng(seed)
    tail = count * 15 // 100
    return np.concatenate([rng.normal(1.0, 0.1, count - tail), 1.3 * (1 + rng.pareto(2.5, tail))])


def median_seconds(function, runs):
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        function()
        times.append(time.perf_counter() - start)
    return statistics.median(times), times


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--powerlaw-runs", type=int, default=3)
    parser.add_argument("--no-powerlaw", action="store_true", help="skip powerlaw.Fit (about 20 s per run)")
    args = parser.parse_args()

    analyse_durations(durations(1000))  # imports and first-call costs out of the timings
    ours = {}
    for count, target in TARGETS_S.items():
        data = durations(count)
        ours[count], times = median_seconds(lambda: analyse_durations(data), args.runs)
        analysis = analyse_durations(data)
        print(f"analyse_durations, {count} durations: median {ours[count] * 1e3:.1f} ms "
              f"(target {target * 1e3:.0f} ms; runs: {', '.join(f'{t * 1e3:.1f}' for t in times)} ms); "
              f"pivot {analysis.pivot_seconds:.4f} s, "
              f"tail {analysis.tail_fraction:.2%} {analysis.tail_family}, "
              f"alpha {analysis.fit('power_law').parameters['alpha']:.3f}")
    if args.no_powerlaw:
        return
    import powerlaw

    data = durations(10_000)
    theirs, times = median_seconds(lambda: powerlaw.Fit(data, verbose=False).power_law.alpha, args.powerlaw_runs)
    fit = powerlaw.Fit(data, verbose=False)
    print(f"powerlaw.Fit(data), 10000 durations: median {theirs:.2f} s "
          f"(runs: {', '.join(f'{t:.2f}' for t in times)} s); xmin {fit.xmin:.4f} s, alpha {fit.power_law.alpha:.3f}")
    print(f"powerlaw.Fit / analyse_durations at 10000 durations: {theirs / ours[10_000]:.0f}x")


if __name__ == "__main__":
    main()
