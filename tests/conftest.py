"""Shared fixtures for tests that run real programs under the real recorder.

    recorder_lib   path of libioassess.so: the installed package's (ioassess.recorder_library_path(),
                   which honours $IOASSESS_LIBRARY) if it exists, else plugin/out/libioassess.so,
                   built with `make -C plugin` (incremental, so always current).
    run_recorded   run_recorded(cmd, trace_dir, env=None) runs the argument list cmd (no shell)
                   with the recorder preloaded and its traces going to trace_dir (created if
                   needed). The environment is the test's own without LD_PRELOAD and IOASSESS_*
                   variables, plus env (an LD_PRELOAD given there is kept in front of the
                   recorder). Returns the subprocess.CompletedProcess with text stdout and stderr
                   captured; never raises on a non-zero exit status.
"""
import os
import pathlib
import subprocess

import pytest

import ioassess

REPO = pathlib.Path(__file__).resolve().parents[1]
RUN_TIMEOUT_S = 300


@pytest.fixture(scope="session")
def recorder_lib():
    installed = ioassess.recorder_library_path()
    if os.path.isfile(installed):
        return installed
    build = subprocess.run(["make", "-C", str(REPO / "plugin"), "--no-print-directory"], capture_output=True, text=True)
    built = REPO / "plugin" / "out" / "libioassess.so"
    if build.returncode != 0 or not built.is_file():
        pytest.fail(f"the recorder library is not installed and `make -C plugin` failed:\n{build.stderr[-3000:]}")
    return str(built)


@pytest.fixture
def run_recorded(recorder_lib):
    def run(cmd, trace_dir, env=None):
        os.makedirs(trace_dir, mode=0o700, exist_ok=True)
        inherited = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD" and not k.startswith("IOASSESS_")}
        full_env = {**inherited, **(env or {})}
        preload = [full_env["LD_PRELOAD"]] if full_env.get("LD_PRELOAD") else []
        full_env["LD_PRELOAD"] = ":".join(preload + [recorder_lib])
        full_env["IOASSESS_TRACE_DIR"] = os.path.abspath(trace_dir)
        return subprocess.run([str(arg) for arg in cmd], env=full_env, capture_output=True, text=True,
                              timeout=RUN_TIMEOUT_S)
    return run
