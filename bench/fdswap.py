"""An application that swaps files under descriptor numbers, run many times under the recorder:
how many runs corrupted the application's file or did not exit cleanly (docs/security.md,
"The recorder"). The suite runs 10 of each; this is the 200-run count.

    python3 bench/fdswap.py [--runs 200] [--library PATH]

tests/progs/bin/fdswap (built by `make -C tests/progs`) opens a patterned victim file at
descriptor 200 and loops dup2(200, k); close(k) for k = 3..9 while 160 threads pwrite; a run
is corrupt when the victim differs from its pattern afterwards, a crash when the program does
not exit 0. Both a 64 MiB victim (zeros or a CLOCK slot written into it) and a 4 KiB one (a
mapping past its end: SIGBUS) are tried.
"""
import argparse
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile

REPO = pathlib.Path(__file__).resolve().parents[1]
FDSWAP = REPO / "tests" / "progs" / "bin" / "fdswap"
PATTERN = bytes((i * 131 + 7) & 0xFF for i in range(256))   # byte i of the victim, as fdswap checks it
OPS_PER_THREAD = 2000
VICTIM_SIZES = (64 << 20, 4096)


def installed_library():
    sys.path[:] = [entry for entry in sys.path if pathlib.Path(entry or ".").resolve() != REPO]
    import ioassess
    return ioassess.recorder_library_path()


def count_outcomes(library, victim_bytes, runs, scratch):
    """(corrupted, crashed) over `runs` runs of fdswap under library."""
    original = PATTERN * (victim_bytes // len(PATTERN))
    victim = scratch / "victim"
    victim.write_bytes(original)
    corrupted = crashed = 0
    for _ in range(runs):
        work, traces = scratch / "work", scratch / "traces"
        work.mkdir()
        traces.mkdir(mode=0o700)
        env = {**os.environ, "LD_PRELOAD": library, "IOASSESS_TRACE_DIR": str(traces)}
        try:
            result = subprocess.run([str(FDSWAP), str(victim), str(work), str(OPS_PER_THREAD)], env=env,
                                    capture_output=True, timeout=300)
            crashed += result.returncode != 0
        except subprocess.TimeoutExpired:   # a hang is counted as a crash, not the end of the count
            crashed += 1
        if victim.read_bytes() != original:
            corrupted += 1
            victim.write_bytes(original)
        shutil.rmtree(work)
        shutil.rmtree(traces)
    return corrupted, crashed


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--library", help="the recorder to try (default: the installed one)")
    args = parser.parse_args()
    if not FDSWAP.exists():
        sys.exit(f"{FDSWAP} is missing: make -C tests/progs")
    library = args.library or installed_library()
    print(f"fdswap, {args.runs} runs per victim size, under {library}")
    for victim_bytes in VICTIM_SIZES:
        with tempfile.TemporaryDirectory(prefix="ioassess-fdswap-") as scratch:
            corrupted, crashed = count_outcomes(library, victim_bytes, args.runs, pathlib.Path(scratch))
        print(f"  victim of {victim_bytes:>9,} bytes: {corrupted} runs corrupted it, {crashed} did not exit 0")


if __name__ == "__main__":
    main()
