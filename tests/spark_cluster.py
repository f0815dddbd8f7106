"""A Spark standalone cluster on this machine, for tests/test_fleet_spark.py: a master and one
worker (1 core, 1 GiB), run in the foreground by the `spark-class` of the pip-installed PySpark
(its package directory is SPARK_HOME), on 127.0.0.1 and on ports that were free when it started.

    from spark_cluster import spark_cluster_fixture   # noqa: F401 (the fixture spark_cluster, module scope)

    def test_x(spark_cluster):
        spark_cluster.master_url               # spark://127.0.0.1:PORT, what a site gives --master
        spark_cluster.completed_apps()         # {application id: name} of the applications that ended
        spark_cluster.executor_logs(app_id)    # the stderr of each executor the worker ran for one

Everything of the cluster is in one temporary directory: log/ (the daemons' output), local/
(SPARK_LOCAL_DIRS) and work/ (SPARK_WORKER_DIR: work/APP_ID/EXECUTOR_ID/ holds an executor's
stdout and stderr). With one core the worker serves one application at a time: an application
that starts while another holds the core waits for it to end.

Each wait is on a state, the master's JSON at http://127.0.0.1:WEBUI_PORT/json/ (the master
ALIVE, one ALIVE worker, an application completed), looked at every POLL_S, bounded by WAIT_S,
and failing at once when a daemon has ended. Each daemon leads a process group of its own, which
the executors the worker starts are in; the daemons get SIGTERM when the process that started
them dies (PR_SET_PDEATHSIG), and an executor ends with its worker.

Teardown, also after a failure: the worker (whose shutdown ends its executors), then the master,
get SIGTERM (SIGKILL if still there after WAIT_S); any process still in their process groups is
then killed by its pid, and the fixture fails if one is still running.
"""
import contextlib
import importlib.util
import json
import os
import pathlib
import shutil
import signal
import subprocess
import time
import urllib.request

import pytest

from daemons import WAIT_S, die_with_parent, end_daemon, free_port, wait_while_running
from recorder_helpers import clean_env

MASTER = "org.apache.spark.deploy.master.Master"
WORKER = "org.apache.spark.deploy.worker.Worker"
ENDED = ("Z", "X")       # /proc/PID/stat's states of a process that has ended: zombie, dead


class Cluster:
    """The running cluster (see the module doc)."""

    def __init__(self, base, spark_home):
        self.base = base
        self.spark_class = spark_home / "bin" / "spark-class"
        self.master_port, self.master_webui_port, self.worker_webui_port = free_port(), free_port(), free_port()
        self.master_url = f"spark://127.0.0.1:{self.master_port}"
        self.work_dir = base / "work"
        self.env = clean_env({"SPARK_HOME": str(spark_home), "SPARK_LOCAL_DIRS": str(base / "local"),
                              "SPARK_WORKER_DIR": str(self.work_dir)})
        self.daemons = {}    # name -> subprocess.Popen

    def state(self):
        """The master's JSON (status, workers, activeapps, completedapps), or None while it does not answer."""
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.master_webui_port}/json/", timeout=10) as answer:
                return json.load(answer)
        except (OSError, ValueError):
            return None

    def alive_workers(self):
        state = self.state() or {}
        return [worker for worker in state.get("workers", []) if worker["state"] == "ALIVE"]

    def completed_apps(self):
        """{application id: name} of the applications the master lists as completed."""
        state = self.state() or {}
        return {app["id"]: app["name"] for app in state.get("completedapps", [])}

    def executor_logs(self, app_id):
        """The stderr of each executor the worker ran for the application."""
        return [path.read_text(errors="replace") for path in sorted((self.work_dir / app_id).glob("*/stderr"))]

    def wait_until(self, condition, what, timeout_s=WAIT_S):
        """Looks at condition() until it is true; fails the test after timeout_s or when a daemon
        has ended."""
        wait_while_running(condition, what, self.daemons, self.logs, timeout_s)

    def logs(self):
        """The end of each daemon's log, for a failure's message."""
        return "\n".join(f"--- {path.name}:\n{path.read_text(errors='replace')[-3000:]}"
                         for path in sorted((self.base / "log").glob("*.log")))


def spark_home():
    """The pip-installed PySpark's package directory (its bin/spark-class and jars/)."""
    spec = importlib.util.find_spec("pyspark")
    if spec is None:
        pytest.fail("pyspark is not installed; `make test` installs it (`make pydeps`)")
    if shutil.which("java") is None:
        pytest.fail("`java` is not installed; `make test` installs it (`make deps`)")
    return pathlib.Path(spec.submodule_search_locations[0])


def start_daemon(cluster, name, argv):
    """spark-class running a daemon in a process group of its own, its output in log/NAME.log."""
    with open(cluster.base / "log" / f"{name}.log", "wb") as out:
        cluster.daemons[name] = subprocess.Popen([str(cluster.spark_class), *argv], cwd="/", env=cluster.env,
                                                 stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                                 start_new_session=True, preexec_fn=die_with_parent)


def start(cluster):
    start_daemon(cluster, "master", [MASTER, "--host", "127.0.0.1", "--port", str(cluster.master_port),
                                     "--webui-port", str(cluster.master_webui_port)])
    cluster.wait_until(lambda: (cluster.state() or {}).get("status") == "ALIVE", "the master to be ALIVE")
    start_daemon(cluster, "worker", [WORKER, cluster.master_url, "--host", "127.0.0.1", "--cores", "1",
                                     "--memory", "1g", "--webui-port", str(cluster.worker_webui_port),
                                     "--work-dir", str(cluster.work_dir)])
    cluster.wait_until(lambda: len(cluster.alive_workers()) == 1, "the worker to be ALIVE at the master")


def _state_and_group(pid):
    """(state letter, process group) of a process from /proc/PID/stat, or None if it is gone."""
    try:
        stat = pathlib.Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return None
    fields = stat[stat.rindex(")") + 2:].split()
    return fields[0], int(fields[2])


def _running(pid):
    """Whether the process is there and not a zombie (an executor left by its worker is PID 1's,
    which reaps it when it will)."""
    seen = _state_and_group(pid)
    return seen is not None and seen[0] not in ENDED


def processes_in(groups):
    """{pid: command line} of the running processes of the process groups."""
    found = {}
    for entry in os.listdir("/proc"):
        seen = _state_and_group(entry) if entry.isdigit() else None
        if seen is not None and seen[0] not in ENDED and seen[1] in groups:
            with contextlib.suppress(OSError):
                found[int(entry)] = pathlib.Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    return found


def kill_and_wait(pid):
    """SIGKILL to a process; waits until it is gone (at most WAIT_S)."""
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + WAIT_S
    while _running(pid) and time.monotonic() < deadline:
        time.sleep(0.02)


def stop(cluster):
    """The worker, then the master, ended; then whatever is left of their process groups (see the
    module doc). Fails if a process of theirs is still running."""
    groups = {daemon.pid for daemon in cluster.daemons.values()}
    for name in ("worker", "master"):
        if name in cluster.daemons:
            end_daemon(cluster.daemons[name])
    for pid in processes_in(groups):
        kill_and_wait(pid)
    left = processes_in(groups)
    if left:
        pytest.fail(f"still running after the Spark cluster's teardown: {left}")


@contextlib.contextmanager
def running_cluster(base):
    """The cluster, started in base; stopped after the with block, whatever happened in it."""
    for name in ("log", "local", "work"):
        (base / name).mkdir()
    cluster = Cluster(base, spark_home())
    try:
        start(cluster)
        yield cluster
    finally:
        stop(cluster)


@pytest.fixture(scope="module", name="spark_cluster")
def spark_cluster_fixture(tmp_path_factory):
    """A running standalone master and worker (see the module doc), stopped after the module's tests."""
    with running_cluster(tmp_path_factory.mktemp("spark-cluster")) as cluster:
        yield cluster
