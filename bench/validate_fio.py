"""`make validate`, part 2: held-out workloads run by fio (never used to train or calibrate),
judged by a model `ioassess calibrate` makes on this machine first.

Each workload runs under `ioassess run` twice per repeat: on its file evicted from the page
cache (written back, then dropped), then re-run identically (fio's offsets repeat) on the file
read whole into the page cache. The measured loss is the uncached run's I/O time on the file
minus the cached re-run's; the estimate is the time lost the assessment gives the uncached run.

Targets (docs/performance.md, "Validation"): estimated loss within 10 % of the measured one for
random reads of 4 KiB, 64 KiB and 1 MiB and sequential reads of 1 MiB, within 20 % for random
and sequential overwrites of 64 KiB and 1 MiB; on the cached re-runs at most 5 % of the I/O time
blamed on storage; the model agreeing with the kernel on cached vs not cached for at least
97 % of the sampled reads; the cached write typical line within 20 % of fio's cached overwrites
(the model's typical time summed over the cached re-run's ops against their I/O time). Medians
of the repeats, with their spread.

usage: python3 bench/validate_fio.py [--dir DIR] [--repeats N] [--model MODEL.json]
       (DIR: a directory of the file system to judge, not under an excluded prefix such as /var;
       default /tmp; run as root, for drop_caches)
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np

from ioassess.inputs.load import load_job
from ioassess.models.modelfile import load_model
from ioassess.report.classify import CLASS_CODES, classify_ops
from ioassess.report.ground_truth import agreement

HERE = os.path.dirname(os.path.abspath(__file__))
FILE_BYTES = 1 << 30
# name: (fio --rw, block size, bytes moved per run, largest error of the estimate)
WORKLOADS = {
    "randread 4k": ("randread", "4k", 32 << 20, 0.10),
    "randread 64k": ("randread", "64k", 256 << 20, 0.10),
    "randread 1m": ("randread", "1m", 512 << 20, 0.10),
    "read 1m": ("read", "1m", 1 << 30, 0.10),
    "randwrite 64k": ("randwrite", "64k", 256 << 20, 0.20),
    "randwrite 1m": ("randwrite", "1m", 512 << 20, 0.20),
    "write 64k": ("write", "64k", 256 << 20, 0.20),
    "write 1m": ("write", "1m", 512 << 20, 0.20),
}
CACHED_STORAGE_SHARE = 0.05
TYPICAL_WRITE_TOLERANCE = 0.20
READ_AGREEMENT = 0.97
STORAGE = [CLASS_CODES["uncached"], CLASS_CODES["slow"]]


def ioassess(*args):
    """The installed CLI (run from / so that a source tree in the current directory is not it)."""
    return subprocess.run([sys.executable, "-m", "ioassess", *map(str, args)], capture_output=True, text=True,
                          cwd="/")


def fio_command(data, rw, block, io_bytes):
    return ["fio", "--name=validate", f"--filename={data}", f"--size={FILE_BYTES}", f"--rw={rw}", f"--bs={block}",
            f"--io_size={io_bytes}", "--ioengine=psync", "--invalidate=0", "--overwrite=1", "--randrepeat=1",
            "--end_fsync=0", "--output-format=terse"]


def set_state(data, cached):
    """Write dirty pages back, then the file evicted (drop_caches) or read whole."""
    os.sync()
    if cached:
        with open(data, "rb", buffering=0) as f:
            while f.read(16 << 20):
                pass
    else:
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("3\n")


def judged_run(command, data, model, trace_dir):
    """The run's I/O time on the data file, its time lost and the part of it blamed on storage
    under the model, and the sampled reads' agreement counts."""
    result = ioassess("run", "--trace-dir", trace_dir, "--", *command)
    if result.returncode != 0:
        raise SystemExit(f"validate: {' '.join(command)} failed: {result.stderr.strip()}")
    job = load_job([trace_dir])
    per_op = classify_ops(job, model)
    names = np.array([f.name for f in job.files])
    on_file = (names[job.ops["file"]] == data) & (job.ops["direction"] < 2)
    lost = per_op["lost_s"] * on_file
    agreeing = agreement(per_op["model_class"], np.where(on_file, per_op["kernel"], -1), job.ops["direction"],
                         per_op["modelled"], CLASS_CODES)
    decided = agreeing["decided_reads"]
    return {"io_s": float(job.ops["duration_s"][on_file].sum()), "lost_s": float(lost.sum()),
            "typical_s": float(np.nansum(per_op["cached_typical_s"][on_file])),
            "storage_s": float(lost[np.isin(per_op["class"], STORAGE)].sum()),
            "decided_reads": decided,
            "agreeing_reads": round((agreeing["read_agreement"] or 0) * decided)}


def validate_workload(name, data, model, work, repeats):
    rw, block, io_bytes, tolerance = WORKLOADS[name]
    command = fio_command(data, rw, block, io_bytes)
    runs = []
    for repeat in range(repeats):
        pair = {}
        for state in ("uncached", "cached"):
            set_state(data, state == "cached")
            trace_dir = os.path.join(work, f"{name.replace(' ', '-')}-{repeat}-{state}")
            pair[state] = judged_run(command, data, model, trace_dir)
            shutil.rmtree(trace_dir)
        measured = pair["uncached"]["io_s"] - pair["cached"]["io_s"]
        runs.append({**{f"{state}_{k}": v for state, run in pair.items() for k, v in run.items()},
                     "measured_loss_s": measured,
                     "error": (pair["uncached"]["lost_s"] - measured) / measured if measured > 0 else None,
                     "cached_storage_share": pair["cached"]["storage_s"] / pair["cached"]["io_s"],
                     "typical_error": pair["cached"]["typical_s"] / pair["cached"]["io_s"] - 1})
    errors = [r["error"] for r in runs if r["error"] is not None]
    shares = [r["cached_storage_share"] for r in runs]
    median_error = float(np.median(errors)) if errors else None
    return {"workload": name, "tolerance": tolerance, "runs": runs,
            "median_error": median_error, "error_spread": [min(errors), max(errors)] if errors else None,
            "median_cached_storage_share": float(np.median(shares)),
            "median_typical_error": float(np.median([r["typical_error"] for r in runs])),
            "error_ok": median_error is not None and abs(median_error) <= tolerance,
            "cached_ok": float(np.median(shares)) <= CACHED_STORAGE_SHARE,
            "decided_reads": sum(r[f"{s}_decided_reads"] for r in runs for s in ("uncached", "cached")),
            "agreeing_reads": sum(r[f"{s}_agreeing_reads"] for r in runs for s in ("uncached", "cached"))}


def typical_verdict(name, error):
    """Writes: the cached write typical line against fio's cached overwrites (target +-20 %)."""
    if "write" not in name:
        return ""
    return f" (target +-{TYPICAL_WRITE_TOLERANCE:.0%}) {'ok' if abs(error) <= TYPICAL_WRITE_TOLERANCE else 'MISSED'}"


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--dir", default="/tmp")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--model", help="judge with this model instead of one calibrated here first")
    parser.add_argument("--json", default=os.path.join(HERE, "out", "validate_fio.json"))
    args = parser.parse_args()
    if os.geteuid() != 0:
        raise SystemExit("validate: run as root (the uncached runs need /proc/sys/vm/drop_caches)")
    work = tempfile.mkdtemp(prefix="ioassess-validate-", dir=args.dir)
    try:
        calibration_s = None
        model_file = args.model
        if model_file is None:
            model_file = os.path.join(work, "calibrated.json")
            started = time.monotonic()
            result = ioassess("calibrate", "--dir", work, "--out", model_file)
            calibration_s = time.monotonic() - started
            if result.returncode != 0:
                raise SystemExit(f"validate: ioassess calibrate failed: {result.stderr.strip()}")
            print(f"ioassess calibrate: {calibration_s:.1f} s (target <= 60 s)")
        model = load_model(model_file)
        data = os.path.join(work, "data")
        subprocess.run(fio_command(data, "write", "1m", FILE_BYTES), check=True, capture_output=True)
        results = []
        for name in WORKLOADS:
            row = validate_workload(name, data, model, work, args.repeats)
            results.append(row)
            spread = row["error_spread"]
            print(f"{name:>14}: estimated loss {row['median_error']:+.1%} of measured "
                  f"(spread {spread[0]:+.1%} .. {spread[1]:+.1%}; target +-{row['tolerance']:.0%}) "
                  f"{'ok' if row['error_ok'] else 'MISSED'}; cached re-run: "
                  f"{row['median_cached_storage_share']:.1%} blamed on storage "
                  f"{'ok' if row['cached_ok'] else 'MISSED'}, the model's cached typical time "
                  f"{row['median_typical_error']:+.1%} of its I/O time"
                  f"{typical_verdict(name, row['median_typical_error'])}" if spread else f"{name}: no measured loss")
        decided = sum(r["decided_reads"] for r in results)
        agreeing = sum(r["agreeing_reads"] for r in results)
        share = agreeing / decided if decided else 0.0
        print(f"sampled reads: the model agrees with the kernel on {share:.1%} of {decided} "
              f"(target >= {READ_AGREEMENT:.0%}) {'ok' if share >= READ_AGREEMENT else 'MISSED'}")
        os.makedirs(os.path.dirname(args.json), exist_ok=True)
        with open(args.json, "w") as f:
            json.dump({"model": model_file if args.model else "calibrated here", "calibration_s": calibration_s,
                       "workloads": results, "read_agreement": share, "decided_reads": decided}, f, indent=1)
        print(f"details: {args.json}")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
