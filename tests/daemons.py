"""What the tests' services share (tests/slurm.py's Slurm, tests/spark_cluster.py's Spark):
daemons started so that they end with the test run, stopped by pid, and waited for by their
state, never by sleeping for a guessed time."""
import contextlib
import ctypes
import signal
import socket
import subprocess
import time

import pytest

WAIT_S = 120             # for a daemon's state: the machine may be loaded, JVMs start slowly
POLL_S = 0.2             # between two looks at a state that a command or a daemon reports
PR_SET_PDEATHSIG = 1     # <linux/prctl.h>


def free_port():
    """A TCP port no one listens on now (the kernel's choice)."""
    with socket.socket() as probe:
        probe.bind(("", 0))
        return probe.getsockname()[1]


def die_with_parent():
    """For preexec_fn: the daemon gets SIGTERM when the process that started it dies, so a test
    run killed before its teardown leaves none running."""
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


def end_daemon(daemon):
    """SIGTERM, then SIGKILL if it has not ended within WAIT_S; waits until it has."""
    for signum in (signal.SIGTERM, signal.SIGKILL):
        if daemon.poll() is not None:
            return
        daemon.send_signal(signum)
        with contextlib.suppress(subprocess.TimeoutExpired):
            daemon.wait(timeout=WAIT_S)


def wait_while_running(condition, what, daemons, logs, timeout_s=WAIT_S):
    """Looks at condition() every POLL_S until it is true; fails the test, with logs(), after
    timeout_s or as soon as one of daemons ({name: Popen}) has ended."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        ended = {name: daemon.returncode for name, daemon in daemons.items() if daemon.poll() is not None}
        if ended:
            pytest.fail(f"waiting for {what}: {ended} ended\n{logs()}")
        if time.monotonic() > deadline:
            pytest.fail(f"waited {timeout_s} s for {what}\n{logs()}")
        time.sleep(POLL_S)
