"""A real Slurm of one node on this machine, for tests/test_slurm.py: Debian's munged, slurmctld
and slurmd (Slurm 22.05 on Debian 12), whose Epilog is contrib/slurm/epilog.sh installed as a
site installs it (IOASSESS the full path of the installed `ioassess`, CONFIG its epilog.conf).

    from slurm import slurm_cluster_fixture   # noqa: F401 (the fixture slurm_cluster, module scope)

    def test_x(slurm_cluster):
        job = slurm_cluster.sbatch(script, user=alice, cwd=work)   # Slurm's job id
        slurm_cluster.wait_until(lambda: not slurm_cluster.queue(), "the jobs and their Epilogs to end")
        slurm_cluster.job(job)["JobState"]   # scontrol show job: COMPLETED, FAILED, ...

Everything of the cluster is in one directory /tmp/ioassess-slurm-XXXX (its base), which every
user can search:

    munge/    munged's own key (made for this cluster), socket, pid file, log and seed; the munge user's
    etc/      slurm.conf (SLURM_CONF of the daemons and of every command), epilog.sh, epilog.conf
    state/    slurmctld's StateSaveLocation
    spool/    slurmd's SlurmdSpoolDir
    log/      the daemons' logs and pid files, and the epilog's log (epilog.log)
    traces/   the site's TRACE_ROOT, mode 1777: the Lmod module sends a job's traces to
              traces/<user>/<job id>, where the epilog's trace_dir looks
    fleet/    the site's fleet store (the epilog's fleet_store), root's, mode 0750
    modules/  ioassess.lua, made by contrib/lmod/make-module.sh for this installation
    work/     where the tests make their users' directories
    owner.pid the pid of the process that made the cluster

The daemons run as root (SlurmUser and SlurmdUser), munged as the munge user; slurmctld and
slurmd listen on ports that were free when the cluster was made (never 6817/6818, which
another Slurm on the machine may hold). Each wait is on a state (a socket, sinfo's node state,
squeue), looked at every POLL_S and bounded by WAIT_S. The daemons get SIGTERM when the process
that started them dies (PR_SET_PDEATHSIG), so a test run killed before its teardown leaves none
running; its base (whose owner.pid names a process that is gone) is removed by the next run.

Teardown, also after a failure: every job left is cancelled and waited for (its Epilog too),
then slurmd, slurmctld and munged are ended by their pids and the base is removed.

Root only. The Debian packages (the Makefile's DEBIAN_TOOLS) are installed with apt-get when
missing; the fixture skips, with the reason, only when they cannot be.
"""
import contextlib
import os
import pathlib
import pwd
import re
import shutil
import socket
import subprocess
import sys
import sysconfig
import tempfile

import pytest

from ioassess.report.schema import CHECK_SCHEMA_ENV
from daemons import WAIT_S, die_with_parent, end_daemon, free_port, wait_while_running
from recorder_helpers import missing_debian_packages

REPO = pathlib.Path(__file__).resolve().parents[1]
EPILOG_SCRIPT = REPO / "contrib" / "slurm" / "epilog.sh"
MAKE_MODULE = REPO / "contrib" / "lmod" / "make-module.sh"
LMOD = "/usr/share/lmod/lmod/libexec/lmod"
# command (or file) -> Debian package
PACKAGES = {"munged": "munge", "slurmctld": "slurmctld", "slurmd": "slurmd", "sbatch": "slurm-client",
            LMOD: "lmod"}
BASE_PREFIX = "ioassess-slurm-"
OWNER = "owner.pid"      # in the base: the pid of the process that made the cluster
COMMAND_TIMEOUT_S = 120
EPILOG_TIME_LIMIT_S = 60
# The commands' environment (and so, by sbatch's default --export=ALL, the jobs'): a plain one.
BASE_ENV = {"PATH": "/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin", "LANG": "C.UTF-8"}

SLURM_CONF = """\
ClusterName=ioassess-test
SlurmctldHost={node}(127.0.0.1)
SlurmctldPort={slurmctld_port}
SlurmdPort={slurmd_port}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket={base}/munge/munge.socket
StateSaveLocation={base}/state
SlurmdSpoolDir={base}/spool
SlurmctldPidFile={base}/log/slurmctld.pid
SlurmdPidFile={base}/log/slurmd.pid
SlurmctldLogFile={base}/log/slurmctld.log
SlurmdLogFile={base}/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SwitchType=switch/none
MpiDefault=none
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
MailProg=/bin/true
# the tests look at ended jobs with scontrol for as long as they run
MinJobAge=3600
Epilog={base}/etc/epilog.sh
PrologEpilogTimeout={epilog_timeout}
NodeName={node} NodeAddr=127.0.0.1 CPUs={cpus} State=UNKNOWN
PartitionName=debug Nodes={node} Default=YES MaxTime=INFINITE State=UP
"""


class Unavailable(Exception):
    """Slurm's packages cannot be installed here: the one-line reason."""


class Cluster:
    """The running cluster (see the module doc)."""

    def __init__(self, base, node):
        self.base = base
        self.node = node
        self.conf = base / "etc" / "slurm.conf"
        self.settings = base / "etc" / "epilog.conf"
        self.epilog_log = base / "log" / "epilog.log"
        self.trace_root = base / "traces"
        self.fleet_store = base / "fleet"
        self.modules = base / "modules"
        self.work = base / "work"
        self.env = {**BASE_ENV, "SLURM_CONF": str(self.conf)}
        self.daemons = {}    # name -> subprocess.Popen

    def command(self, *args, user=None, cwd="/", check=True):
        """A command (sbatch, squeue, cat ...) run with the cluster's environment as root, or as
        `user` (a passwd entry) with runuser; its CompletedProcess (text). check: fail the test
        when it exits non-zero."""
        argv = [str(arg) for arg in args]
        if user is not None:
            argv = ["runuser", "-u", user.pw_name, "--", *argv]
        result = subprocess.run(argv, cwd=cwd, env=self.env, capture_output=True, text=True,
                                timeout=COMMAND_TIMEOUT_S)
        if check and result.returncode != 0:
            pytest.fail(f"`{' '.join(argv)}` failed (exit {result.returncode}): {result.stderr.strip()}\n"
                        f"{self.logs()}")
        return result

    def sbatch(self, script, user=None, cwd="/"):
        """Submits the batch script (a path) as `user` (None: root) from cwd; Slurm's job id."""
        submitted = self.command("sbatch", "--parsable", script, user=user, cwd=cwd)
        return submitted.stdout.strip().split(";")[0]

    def queue(self):
        """The ids of the jobs squeue lists (pending, running, completing: an Epilog running)."""
        return self.command("squeue", "--noheader", "--format=%i").stdout.split()

    def job(self, job_id):
        """`scontrol show job` of a job, as {field: value}."""
        shown = self.command("scontrol", "--oneliner", "show", "job", job_id).stdout
        return dict(re.findall(r"(\w+)=(\S*)", shown))

    def node_state(self):
        return self.command("sinfo", "--noheader", "--nodes", self.node, "--format=%T", check=False).stdout.strip()

    def wait_until(self, condition, what, timeout_s=WAIT_S):
        """Looks at condition() until it is true; fails the test after timeout_s or when a daemon
        has ended."""
        wait_while_running(condition, what, self.daemons, self.logs, timeout_s)

    def logs(self):
        """The end of every log of the cluster, for a failure's message."""
        texts = []
        for path in sorted((self.base / "log").glob("*.log")) + sorted((self.base / "log").glob("*.out")) + \
                [self.base / "munge" / "munged.log"]:
            if path.exists():
                texts.append(f"--- {path.name}:\n{path.read_text(errors='replace')[-3000:]}")
        return "\n".join(texts)


def ensure_installed():
    """Installs the Debian packages of the missing commands (root, apt-get); Unavailable if it cannot."""
    problem = missing_debian_packages(PACKAGES, "Slurm")
    if problem:
        raise Unavailable(problem)


def installed_command():
    """The full path of the `ioassess` command of the Python running the tests (not a pyenv shim,
    which needs pyenv's environment: an Epilog has none)."""
    path = os.path.join(sysconfig.get_path("scripts"), "ioassess")
    if not os.access(path, os.X_OK):
        pytest.fail(f"{path} is missing: install the checkout with `pip install -e .` (make test does)")
    return path


def start_daemon(cluster, name, argv, user=None):
    """A daemon run in the foreground, its output in log/NAME.out; recorded in cluster.daemons."""
    with open(cluster.base / "log" / f"{name}.out", "wb") as out:
        cluster.daemons[name] = subprocess.Popen(argv, cwd="/", env=cluster.env, stdin=subprocess.DEVNULL, stdout=out,
                                                 stderr=subprocess.STDOUT, user=user, preexec_fn=die_with_parent)


def make_directories(base):
    for name in ("munge", "etc", "state", "spool", "log", "traces", "fleet", "modules", "work"):
        (base / name).mkdir()
    munge = pwd.getpwnam("munge")
    os.chown(base / "munge", munge.pw_uid, munge.pw_gid)
    os.chmod(base / "munge", 0o755)                 # every user's Slurm commands reach the socket
    os.chmod(base / "traces", 0o1777)               # like /tmp: each user's directory made by the recorder
    os.chmod(base / "fleet", 0o750)                 # the store: root's (docs/fleet.md, "Permissions")
    os.chmod(base / "work", 0o755)


def write_munge_key(base):
    munge = pwd.getpwnam("munge")
    key = base / "munge" / "munge.key"
    key.write_bytes(os.urandom(1024))
    os.chown(key, munge.pw_uid, munge.pw_gid)
    os.chmod(key, 0o400)


def write_slurm_conf(cluster):
    text = SLURM_CONF.format(node=cluster.node, base=cluster.base, slurmctld_port=free_port(),
                             slurmd_port=free_port(), cpus=os.cpu_count(),
                             epilog_timeout=2 * EPILOG_TIME_LIMIT_S)
    cluster.conf.write_text(text)
    os.chmod(cluster.conf, 0o644)


def write_epilog_settings(cluster):
    """epilog.conf with the cluster's site directories (contrib/slurm/epilog.conf names every setting)."""
    settings = {"trace_dir": f"{cluster.trace_root}/%u/%j", "output": "%w/ioassess-%j.html",
                "json": "%w/ioassess-%j.json", "nodes": "first", "time_limit": str(EPILOG_TIME_LIMIT_S),
                "log": str(cluster.epilog_log), "fleet_store": str(cluster.fleet_store)}
    cluster.settings.write_text("[epilog]\n" + "".join(f"{name} = {value}\n" for name, value in settings.items()))
    os.chmod(cluster.settings, 0o644)


def install_epilog(cluster):
    """contrib/slurm/epilog.sh with its IOASSESS and CONFIG lines set, as a site installs it; and
    the schema check the tests put on every assessment (conftest.py), since Slurm gives an Epilog
    an environment of its own, not the tests'."""
    lines = EPILOG_SCRIPT.read_text().splitlines()
    installed = {"IOASSESS": installed_command(), "CONFIG": str(cluster.settings)}
    for index, line in enumerate(lines):
        name = line.split("=", 1)[0]
        if name in installed:
            lines[index] = f"{name}={installed.pop(name)}"
    assert not installed, f"{EPILOG_SCRIPT} has no line setting {sorted(installed)}"
    lines.insert(1, f"export {CHECK_SCHEMA_ENV}=1")
    path = cluster.base / "etc" / "epilog.sh"
    path.write_text("\n".join(lines) + "\n")
    os.chmod(path, 0o755)


def make_lmod_module(cluster):
    """ioassess.lua of this installation, sending traces to the cluster's TRACE_ROOT."""
    env = {**BASE_ENV, "PATH": f"{os.path.dirname(installed_command())}:{BASE_ENV['PATH']}", "PYTHON": sys.executable}
    made = subprocess.run([str(MAKE_MODULE), str(cluster.trace_root)], env=env, cwd="/", capture_output=True,
                          text=True, timeout=COMMAND_TIMEOUT_S)
    assert made.returncode == 0, made.stderr
    (cluster.modules / "ioassess.lua").write_text(made.stdout)


def start_munged(cluster):
    munge = cluster.base / "munge"
    socket_path = munge / "munge.socket"
    start_daemon(cluster, "munged", ["munged", "--foreground", f"--socket={socket_path}",
                                     f"--key-file={munge / 'munge.key'}", f"--pid-file={munge / 'munged.pid'}",
                                     f"--log-file={munge / 'munged.log'}", f"--seed-file={munge / 'munged.seed'}"],
                 user="munge")
    cluster.wait_until(socket_path.exists, "munged's socket")


def start_slurm(cluster):
    start_daemon(cluster, "slurmctld", ["slurmctld", "-D"])
    cluster.wait_until(lambda: cluster.command("scontrol", "ping", check=False).returncode == 0,
                       "slurmctld to answer")
    start_daemon(cluster, "slurmd", ["slurmd", "-D"])
    cluster.wait_until(lambda: cluster.node_state() == "idle", f"node {cluster.node} to be idle")


def stop(cluster):
    """Every job cancelled and waited for, then the daemons ended (see the module doc)."""
    try:
        cancel_jobs(cluster)
    finally:
        for name in ("slurmd", "slurmctld", "munged"):
            if name in cluster.daemons:
                end_daemon(cluster.daemons[name])


def cancel_jobs(cluster):
    """Every job slurmctld still lists, cancelled; waits until none is listed (their Epilogs ended)."""
    slurmctld = cluster.daemons.get("slurmctld")
    if slurmctld is None or slurmctld.poll() is not None:
        return
    left = cluster.queue()
    if left:
        cluster.command("scancel", *left, check=False)
        cluster.wait_until(lambda: not cluster.queue(), "the cancelled jobs to end")


def remove_leftovers():
    """The bases of runs killed before their teardown (their daemons ended with them)."""
    for base in pathlib.Path("/tmp").glob(BASE_PREFIX + "*"):
        try:
            owner = int((base / OWNER).read_text())
        except (FileNotFoundError, ValueError):
            owner = None
        if owner is None or not os.path.exists(f"/proc/{owner}"):
            shutil.rmtree(base, ignore_errors=True)


@contextlib.contextmanager
def running_cluster():
    """The cluster, started; stopped and removed after the with block, whatever happened in it."""
    remove_leftovers()
    base = pathlib.Path(tempfile.mkdtemp(prefix=BASE_PREFIX, dir="/tmp"))
    os.chmod(base, 0o755)
    (base / OWNER).write_text(str(os.getpid()))
    cluster = Cluster(base, node=socket.gethostname().split(".")[0])
    try:
        make_directories(base)
        write_munge_key(base)
        write_slurm_conf(cluster)
        write_epilog_settings(cluster)
        install_epilog(cluster)
        make_lmod_module(cluster)
        start_munged(cluster)
        start_slurm(cluster)
        yield cluster
    finally:
        try:
            stop(cluster)
        finally:
            shutil.rmtree(base, ignore_errors=True)


@pytest.fixture(scope="module", name="slurm_cluster")
def slurm_cluster_fixture(installation_reachable):
    """A running one-node Slurm whose Epilog is ioassess's (see the module doc); its users'
    programs and its Epilog's worker reach the installation (installation_reachable)."""
    if os.geteuid() != 0:
        pytest.fail("a Slurm cluster needs root (daemons, jobs of other users): run the tests as root (make test)")
    try:
        ensure_installed()
    except Unavailable as error:
        pytest.skip(f"Debian's Slurm cannot be installed: {error}")
    with running_cluster() as cluster:
        yield cluster
