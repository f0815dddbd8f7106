"""`ioassess epilog` as Slurm runs it (docs/epilog.md): as root, with Slurm's Epilog variables,
for an unprivileged user whose traces a real program wrote under the recorder; and as that
user, as Slurm's TaskEpilog runs it. Also the Lmod module (run by Debian's Lmod), the Slurm
wrapper script and the Spack recipe (compiled only: there is no Spack here) in contrib/.

The tests create the user `ioassess-test` when it is missing. Its programs load the installed
recorder and Python, which must be reachable by users as on any cluster; where the
installation sits under a directory others cannot search (here /root, of pyenv), the module's
fixture lets others search it for the duration of these tests and restores its mode after.
"""
import datetime
import json
import os
import pwd
import shutil
import stat
import subprocess
import sys
import tempfile
import time

import darshan
import pytest
from darshan.log_utils import get_log_path

import ioassess
from ioassess.epilog import first_host
from recorder_helpers import REPO, clean_env, describe, tool

USER = "ioassess-test"
JOB = "4242"
# The job of PyDarshan's sample-dxt-simple.darshan (16 processes, DXT on).
DARSHAN_JOB = "4233209"
LMOD = "/usr/share/lmod/lmod/libexec/lmod"


@pytest.fixture(scope="module")
def job_user():
    if os.geteuid() != 0:
        pytest.fail("these tests run the epilog as Slurm does, as root: run them as root (make test)")
    try:
        return pwd.getpwnam(USER)
    except KeyError:
        subprocess.run([tool("useradd"), "--system", "--no-create-home", "--home-dir", "/nonexistent",
                        "--shell", "/usr/sbin/nologin", USER], check=True, capture_output=True)
        return pwd.getpwnam(USER)


@pytest.fixture(scope="module")
def installation_reachable(job_user):
    """Let others search the directories above the installed Python and ioassess that they
    cannot (e.g. /root of a pyenv install), until the module's tests are done."""
    changed = {}
    for path in (os.path.realpath(sys.executable), ioassess.__file__, darshan.__file__):
        directory = os.path.dirname(path)
        while directory != "/":
            mode = os.stat(directory).st_mode
            if not mode & stat.S_IXOTH and directory not in changed:
                changed[directory] = stat.S_IMODE(mode)
                os.chmod(directory, stat.S_IMODE(mode) | stat.S_IXOTH)
            directory = os.path.dirname(directory)
    yield
    for directory, mode in changed.items():
        os.chmod(directory, mode)


class Site:
    """A simulated site: trace root, the job's working directory, settings and log, in a
    directory every user can search."""

    def __init__(self, root, user):
        self.root = root
        self.user = user
        self.traces = os.path.join(root, "traces")
        self.work = os.path.join(root, "work")
        self.darshan = os.path.join(root, "darshan-logs")
        self.log = os.path.join(root, "epilog.log")
        os.mkdir(self.traces)
        os.chmod(self.traces, 0o1777)   # like /tmp: every user makes their own directory in it
        os.mkdir(self.work, 0o700)
        os.chown(self.work, user.pw_uid, user.pw_gid)

    def trace_dir(self, job=JOB):
        return os.path.join(self.traces, self.user.pw_name, job)

    def report(self, job=JOB, suffix="html"):
        return os.path.join(self.work, f"ioassess-{job}.{suffix}")

    def settings(self, **overrides):
        values = {"trace_dir": os.path.join(self.traces, "%u", "%j"), "output": "%w/ioassess-%j.html",
                  "json": "%w/ioassess-%j.json", "log": self.log, "time_limit": "120"}
        values.update(overrides)
        path = os.path.join(self.root, "epilog.conf")
        with open(path, "w") as f:
            f.write("[epilog]\n" + "".join(f"{name} = {value}\n" for name, value in values.items()))
        os.chmod(path, 0o644)
        return path

    def slurm_environment(self, job=JOB, node="node1", **extra):
        """What slurmd gives its Epilog (Slurm's prolog_epilog guide and slurmd's source)."""
        return {"SLURM_JOB_ID": job, "SLURM_JOBID": job, "SLURM_JOB_UID": str(self.user.pw_uid),
                "SLURM_JOB_USER": self.user.pw_name, "SLURM_JOB_GID": str(self.user.pw_gid),
                "SLURM_JOB_WORK_DIR": self.work, "SLURMD_NODENAME": node, "SLURM_JOB_NODELIST": "node[1-2]",
                "SLURM_SCRIPT_CONTEXT": "epilog_slurmd", **extra}

    def write_as_user(self, path, data):
        """path, and the directories up to it that are missing, created as the job's user's."""
        directory = os.path.dirname(path)
        if not os.path.isdir(directory):
            self.as_user([tool("mkdir"), "-p", "-m", "700", directory], clean_env({}), cwd="/")
        with open(path, "wb") as f:
            f.write(data)
        os.chown(path, self.user.pw_uid, self.user.pw_gid)

    def log_lines(self):
        if not os.path.exists(self.log):
            return []
        with open(self.log) as f:
            return f.read().splitlines()

    def as_user(self, cmd, env, cwd=None):
        return subprocess.run([str(c) for c in cmd], env=env, cwd=cwd or self.work, user=self.user.pw_uid,
                              group=self.user.pw_gid, extra_groups=[], capture_output=True, text=True, timeout=300)

    def record_job(self, recorder_lib, job=JOB):
        """A real program writes and syncs a file as the job's user, under the recorder, in the job."""
        env = clean_env({"LD_PRELOAD": recorder_lib, "IOASSESS_TRACE_DIR": self.trace_dir(job), "SLURM_JOB_ID": job})
        result = self.as_user([tool("dd"), "if=/dev/zero", "of=data", "bs=64k", "count=16", "conv=fsync"], env)
        assert result.returncode == 0, result.stderr
        traces = [name for name in os.listdir(self.trace_dir(job)) if name.endswith(".iot")]
        assert traces, f"no trace in {self.trace_dir(job)}"
        return [os.path.join(self.trace_dir(job), name) for name in traces]

    def place_darshan_log(self, shipped, job, day=None):
        """A shipped Darshan log where Darshan puts a log of this user and job: LOGPATH/year/
        month/day/<user>_<exe>_id<job>_<month>-<day>-<seconds>-<hash>.darshan."""
        day = day or datetime.date.today()
        directory = os.path.join(self.darshan, str(day.year), str(day.month), str(day.day))
        os.makedirs(directory, exist_ok=True)
        path = os.path.join(directory, f"{self.user.pw_name}_a.out_id{job}_{day.month}-{day.day}-3600-1234.darshan")
        shutil.copyfile(get_log_path(shipped), path)
        os.chown(path, self.user.pw_uid, self.user.pw_gid)
        os.chmod(path, 0o400)
        return path


@pytest.fixture
def site(job_user, installation_reachable):
    root = tempfile.mkdtemp(prefix="ioassess-epilog-", dir="/tmp")
    os.chmod(root, 0o755)
    yield Site(root, job_user)
    shutil.rmtree(root)


def epilog(ioassess, settings, env):
    """`ioassess epilog --config SETTINGS` as slurmd runs its Epilog: as root, from /."""
    return ioassess("epilog", "--config", settings, env=env)


def assert_one_line(site, result, *parts):
    """Exit status 0 and exactly one line, in the log and on stderr, containing parts."""
    assert result.returncode == 0, describe(result)
    lines = site.log_lines()
    assert len(lines) == 1, lines
    assert all(part in lines[0] for part in parts), lines[0]
    assert result.stderr.splitlines() == lines
    return lines[0]


def test_the_report_is_written_as_the_job_user(ioassess, site, recorder_lib):
    site.record_job(recorder_lib)
    result = epilog(ioassess, site.settings(), site.slurm_environment())
    assert_one_line(site, result, f"job {JOB} ({USER}): wrote {site.report()} and {site.report(suffix='json')}")
    for path in (site.report(), site.report(suffix="json")):
        status = os.lstat(path)
        assert (status.st_uid, status.st_gid) == (site.user.pw_uid, site.user.pw_gid)
        assert stat.S_IMODE(status.st_mode) == 0o600
    with open(site.report(suffix="json")) as f:
        assessment = json.load(f)
    assert assessment["job"]["job_id"] == JOB
    assert assessment["job"]["exe"].endswith("/dd") and assessment["processes"]


@pytest.mark.parametrize("planted", ["report", "directory"])
def test_a_symlink_at_the_report_path_is_not_followed(ioassess, site, recorder_lib, planted):
    site.record_job(recorder_lib)
    victim = os.path.join(site.root, "victim")   # a file of the user's that a link could send the report over
    with open(victim, "w") as f:
        f.write("precious\n")
    os.chown(victim, site.user.pw_uid, site.user.pw_gid)
    before = os.stat(victim)
    if planted == "report":
        link, output, refused = site.report(), "%w/ioassess-%j.html", site.report()
        os.symlink(victim, link)
    else:
        elsewhere = os.path.join(site.root, "elsewhere")
        os.mkdir(elsewhere)
        os.chown(elsewhere, site.user.pw_uid, site.user.pw_gid)
        link, output, refused = os.path.join(site.work, "reports"), "%w/reports/%j.html", os.path.join(site.work, "reports")
        os.symlink(elsewhere, link)
    result = epilog(ioassess, site.settings(output=output, json=""), site.slurm_environment())
    assert_one_line(site, result, f"{refused}: is a symbolic link: not followed")
    after = os.stat(victim)
    assert open(victim).read() == "precious\n"
    assert (after.st_mtime_ns, after.st_size, after.st_ino) == (before.st_mtime_ns, before.st_size, before.st_ino)
    assert os.path.islink(link)
    if planted == "directory":
        assert os.listdir(os.path.join(site.root, "elsewhere")) == []


def garbage(site, job, name=None):
    """A file of the job's user named as one of the job's traces, holding random bytes."""
    path = os.path.join(site.trace_dir(job), name or f"ioassess_{job}_node1_r0_p99999_0.iot")
    site.write_as_user(path, os.urandom(8192))
    return path, "not an ioassess trace (bad magic)"


def truncated(site, job, recorder_lib):
    """A real trace of another job, cut to 100 bytes and named as one of this job's."""
    real = site.record_job(recorder_lib, job="1")[0]
    path = os.path.join(site.trace_dir(job), f"ioassess_{job}_node1_r0_p99998_0.iot")
    with open(real, "rb") as source:
        site.write_as_user(path, source.read(100))
    return path, "truncated: 100 bytes"


@pytest.mark.parametrize("damage", ["garbage", "truncated"])
def test_a_corrupt_trace_is_one_logged_line_and_exit_0(ioassess, site, recorder_lib, damage):
    path, problem = garbage(site, JOB) if damage == "garbage" else truncated(site, JOB, recorder_lib)
    result = epilog(ioassess, site.settings(), site.slurm_environment())
    assert_one_line(site, result, f"job {JOB} ({USER}): {path}: {problem}")
    assert not os.path.exists(site.report())


def test_a_corrupt_trace_beside_good_ones_is_named_and_the_report_still_written(ioassess, site, recorder_lib):
    site.record_job(recorder_lib)
    path, problem = garbage(site, JOB)
    result = epilog(ioassess, site.settings(json=""), site.slurm_environment())
    assert_one_line(site, result, f"wrote {site.report()}; 1 input left out, the first: {path}: {problem}")
    assert os.stat(site.report()).st_uid == site.user.pw_uid


def test_a_job_without_traces_is_one_logged_line_and_exit_0(ioassess, site):
    result = epilog(ioassess, site.settings(darshan_logpath=site.darshan), site.slurm_environment())
    assert_one_line(site, result, f"nothing to report: no trace {site.trace_dir()}/ioassess_{JOB}_*.iot",
                    f"no Darshan log {site.darshan}/YEAR/MONTH/DAY/{USER}_*_id{JOB}_*.darshan")


def test_the_time_limit_stops_a_stuck_report(ioassess, site, recorder_lib):
    """The worker blocks for good opening the model, a FIFO nobody writes (as a read from a
    hung file system would): it is killed at the limit and the epilog ends soon after."""
    site.record_job(recorder_lib)
    fifo = os.path.join(site.root, "model.json")
    os.mkfifo(fifo, 0o644)
    started = time.monotonic()
    result = epilog(ioassess, site.settings(model=fifo, time_limit="2"), site.slurm_environment())
    elapsed = time.monotonic() - started
    assert_one_line(site, result, "the report took longer than the time limit of 2 s and was stopped: no report written")
    assert elapsed < 2 + 10, elapsed   # the limit, plus starting Python twice on a loaded machine
    assert not os.path.exists(site.report())
    left = [pid for pid in os.listdir("/proc") if pid.isdigit() and _owner(pid) == site.user.pw_uid]
    assert left == [], f"processes of {USER} left: {left}"


def _owner(pid):
    try:
        return os.stat(f"/proc/{pid}").st_uid
    except FileNotFoundError:
        return None


def test_the_darshan_log_is_found_in_darshans_layout(ioassess, site):
    log = site.place_darshan_log("sample-dxt-simple.darshan", DARSHAN_JOB)
    site.place_darshan_log("sample.darshan", "4478544")   # another job's log in the same day directory
    settings = site.settings(darshan_logpath=site.darshan)
    result = epilog(ioassess, settings, site.slurm_environment(job=DARSHAN_JOB))
    assert_one_line(site, result, f"wrote {site.report(DARSHAN_JOB)}")
    with open(site.report(DARSHAN_JOB, suffix="json")) as f:
        assessment = json.load(f)
    assert [(i["path"], i["kind"]) for i in assessment["job"]["inputs"]] == [(log, "darshan")]
    assert (assessment["job"]["job_id"], assessment["job"]["nprocs"]) == (DARSHAN_JOB, 16)


def test_a_darshan_log_of_yesterday_is_found_and_merged_with_the_traces(ioassess, site, recorder_lib):
    traces = site.record_job(recorder_lib, job=DARSHAN_JOB)
    log = site.place_darshan_log("sample-dxt-simple.darshan", DARSHAN_JOB,
                                 day=datetime.date.today() - datetime.timedelta(days=1))
    settings = site.settings(darshan_logpath=site.darshan, darshan_days="1")
    result = epilog(ioassess, settings, site.slurm_environment(job=DARSHAN_JOB))
    assert_one_line(site, result, f"wrote {site.report(DARSHAN_JOB)}")
    with open(site.report(DARSHAN_JOB, suffix="json")) as f:
        assessment = json.load(f)
    assert sorted((i["path"], i["kind"]) for i in assessment["job"]["inputs"]) == \
        sorted([(t, "trace") for t in traces] + [(log, "darshan")])


def test_only_the_first_node_of_the_job_reports_unless_every_node_should(ioassess, site, recorder_lib):
    site.record_job(recorder_lib)
    result = epilog(ioassess, site.settings(), site.slurm_environment(node="node2"))
    assert (result.returncode, result.stderr, site.log_lines()) == (0, "", [])
    assert not os.path.exists(site.report())
    result = epilog(ioassess, site.settings(nodes="all", output="%w/ioassess-%j-%h.html", json=""),
                    site.slurm_environment(node="node2"))
    assert_one_line(site, result, f"wrote {site.work}/ioassess-{JOB}-node2.html")


@pytest.mark.parametrize("nodelist, first", [("node1", "node1"), ("n[08-11,14],gpu3", "n08"),
                                             ("gpu3,n[08-11]", "gpu3"), ("rack[2-3]-n[1-4]", "rack2-n1"),
                                             ("c[001-004]x", "c001x")])
def test_the_first_host_of_a_slurm_hostlist(nodelist, first):
    assert first_host(nodelist) == first


def test_as_task_epilog_the_job_user_runs_it_and_task_0_reports_on_any_node(site, recorder_lib):
    site.record_job(recorder_lib)
    log = os.path.join(site.work, "epilog.log")
    settings = site.settings(log=log)
    for procid in ("1", "0"):
        env = clean_env(site.slurm_environment(node="node2", SLURM_PROCID=procid, SLURM_SCRIPT_CONTEXT="epilog_task"))
        result = site.as_user([sys.executable, "-m", "ioassess", "epilog", "--config", settings], env)
        assert result.returncode == 0, describe(result)
        assert os.path.exists(site.report()) == (procid == "0")
    with open(log) as f:
        lines = f.read().splitlines()
    assert len(lines) == 1 and lines[0].endswith(f"wrote {site.report()} and {site.report(suffix='json')}"), lines
    assert os.stat(site.report()).st_uid == site.user.pw_uid


@pytest.mark.parametrize("args, settings, env, message", [
    (["--time-limit", "soon"], {}, {}, "argument --time-limit: 'soon' is not a time limit in seconds"),
    ([], {"colour": "blue"}, {}, "unknown setting 'colour'"),
    ([], {"output": "ioassess-%j.html"}, {}, "ioassess-%j.html: gives ioassess-4242.html, not an absolute path"),
    ([], {"output": "/tmp/%q.html"}, {}, "/tmp/%q.html: unknown placeholder %q"),
    ([], {}, {"SLURM_JOB_ID": ""}, "SLURM_JOB_ID is '', not a job id"),
    ([], {}, {"SLURM_JOB_USER": "root"}, "SLURM_JOB_USER is root, but uid"),
])
def test_bad_settings_and_environment_are_one_line_and_exit_0(ioassess, site, args, settings, env, message):
    result = ioassess("epilog", "--config", site.settings(**settings), *args, env={**site.slurm_environment(), **env})
    assert result.returncode == 0, describe(result)
    assert len(result.stderr.splitlines()) == 1 and message in result.stderr, result.stderr


def test_the_slurm_script_runs_the_epilog_and_exits_0_even_without_ioassess(site):
    script = REPO / "contrib" / "slurm" / "epilog.sh"
    command = os.path.join(os.path.dirname(sys.executable), "ioassess")
    for ioassess_path, expected in ((command, "ioassess epilog["), ("/nonexistent/ioassess", "not found")):
        result = subprocess.run(["/bin/sh", str(script)], env={"IOASSESS": ioassess_path, "PATH": "/usr/bin:/bin"},
                                capture_output=True, text=True, timeout=120, cwd="/")
        assert result.returncode == 0 and expected in result.stderr, describe(result)


def test_the_lmod_module_preloads_both_recorders_inside_a_job_only(tmp_path):
    """make-module.sh fills in the module for the installation; Debian's Lmod loads it."""
    tool(LMOD)
    modules = tmp_path / "modules"
    modules.mkdir()
    path = os.pathsep.join([os.path.dirname(sys.executable), os.environ["PATH"]])
    made = subprocess.run([str(REPO / "contrib" / "lmod" / "make-module.sh"), "/scratch/ioassess"],
                          env={**os.environ, "PATH": path, "PYTHON": sys.executable}, capture_output=True, text=True)
    assert made.returncode == 0, made.stderr
    (modules / "ioassess.lua").write_text(made.stdout)
    show = 'eval "$($LMOD bash load ioassess)"; printf "%s\\n" "$IOASSESS_TRACE_DIR" "$LD_PRELOAD" "$PATH" "$PYTHONPATH"'
    base = {"PATH": "/usr/bin:/bin", "MODULEPATH": str(modules), "LMOD": LMOD, "USER": "alice", "HOME": str(tmp_path)}
    assert ioassess.mpiio_library_path(), "libioassess-mpiio.so was not built: `make deps` installs MPICH's mpicc"
    library = f"{ioassess.recorder_library_path()}:{ioassess.mpiio_library_path()}"
    package_parent = os.path.dirname(os.path.dirname(ioassess.__file__))
    for env, trace_dir, preload in (({"SLURM_JOB_ID": "77", "LD_PRELOAD": "/opt/darshan/lib/libdarshan.so"},
                                     "/scratch/ioassess/alice/77", f"/opt/darshan/lib/libdarshan.so:{library}"),
                                    ({}, "", "")):
        loaded = subprocess.run(["/bin/bash", "-c", show], env={**base, **env}, capture_output=True, text=True)
        assert loaded.returncode == 0, loaded.stderr
        assert loaded.stdout.splitlines() == [trace_dir, preload, f"{os.path.dirname(sys.executable)}:/usr/bin:/bin",
                                              package_parent], loaded.stdout


def test_the_spack_recipe_is_valid_python(tmp_path):
    """Compiled only: running it needs Spack, which is not installed here."""
    subprocess.run([sys.executable, "-m", "py_compile", str(REPO / "contrib" / "spack" / "package.py")], check=True,
                   env={**os.environ, "PYTHONPYCACHEPREFIX": str(tmp_path)})
