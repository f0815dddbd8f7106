"""Classification and time lost of 10^7 ops with a cause model (target: at most 1 s).

The op table looks like a recorder trace's: reads, writes and a few syncs, sizes 1 B to 16 MiB,
durations spread over five orders of magnitude, memory layouts off0, rnd and unknown, in the
column types of ioassess.inputs.trace. Each repetition times classify() plus time_lost_seconds() on
the whole table; the result is the median over the repetitions.
"""
import argparse
import json
import os
import statistics
import time

import numpy as np

from ioassess.models.causes import classify, time_lost_seconds
from ioassess.models.modelfile import load_model

HERE = os.path.dirname(os.path.abspath(__file__))
TARGET_S = 1.0


def op_table(n, seed=1):
    rng = np.random.default_rng(seed)
    return {
        "direction": rng.choice(np.array([0, 1, 2], np.uint8), n, p=[0.6, 0.38, 0.02]),
        "size": (np.uint64(1) << rng.integers(0, 25, n).astype(np.uint64)),
        "duration_s": rng.lognormal(np.log(2e-5), 2.0, n),
        "layout": rng.choice(np.array([0, 1, 2], np.int8), n),
    }


def time_once(model, ops):
    start = time.perf_counter()
    classify(model, ops["direction"], ops["size"], ops["duration_s"], ops["layout"])
    time_lost_seconds(model, ops["direction"], ops["size"], ops["duration_s"], ops["layout"])
    return time.perf_counter() - start


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--ops", type=int, default=10_000_000)
    parser.add_argument("--reps", type=int, default=7)
    parser.add_argument("--model", default="mistral-lustre-2015", help="model name or file")
    parser.add_argument("--json", default=os.path.join(HERE, "out", "models_classify.json"))
    args = parser.parse_args()

    model = load_model(args.model)
    ops = op_table(args.ops)
    seconds = [time_once(model, ops) for _ in range(args.reps)]
    median = statistics.median(seconds)
    print(f"classify + time lost of {args.ops} ops with {model.name}: median {median:.3f} s "
          f"(min {min(seconds):.3f}, max {max(seconds):.3f}, {args.reps} runs; target <= {TARGET_S} s "
          f"for 10^7 ops)")
    os.makedirs(os.path.dirname(args.json), exist_ok=True)
    with open(args.json, "w") as out:
        json.dump({"ops": args.ops, "model": model.name, "reps": args.reps, "median_s": median,
                   "runs_s": seconds, "target_s": TARGET_S}, out, indent=1)
    print(f"  details: {args.json}")
    return 0 if median <= TARGET_S else 1


if __name__ == "__main__":
    raise SystemExit(main())
