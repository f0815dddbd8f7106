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
import grp
import json
import os
import pathlib
import shutil
import stat
import subprocess
import sys
import tempfile
import time

import jinja2
import numpy as np
import pytest
from darshan.log_utils import get_log_path

import ioassess
from ioassess.report import make_report, render
from ioassess.site.epilog import LOG_LINE_LIMIT, answer_history, first_host
from ioassess.site.fleet.record import job_record, keyed
from ioassess.site.fleet.spool import spool_record
from ioassess.units import seconds_text
from recorder_helpers import (ATTACKER_USER, REPO, TEST_USER as USER, clean_env, describe, run_measured, system_user,
                              tool)
from test_darshan_log import darshan_util, inflating_log  # noqa: F401 (darshan_util: a fixture)
from test_modelfile import mutated, nested, set_in, write_huge_model, write_json

pytestmark = pytest.mark.root

HOME_USER = "ioassess-home"
PLANTER_USER = "ioassess-planter"
JOB = "4242"
# The job of PyDarshan's sample-dxt-simple.darshan (16 processes, DXT on).
DARSHAN_JOB = "4233209"
LMOD = "/usr/share/lmod/lmod/libexec/lmod"


@pytest.fixture(scope="module")
def attacker():
    """A second unprivileged user, who plants files where the job's user's are looked for."""
    return system_user(ATTACKER_USER)


@pytest.fixture(scope="module")
def planter():
    """A job user with a home, of its own for the tests in which the job's user plants files
    that the reports of every test run as that user would meet (compiled templates, models)."""
    return system_user(PLANTER_USER, home=f"/home/{PLANTER_USER}")


@pytest.fixture(scope="module")
def home_user():
    """A job user with a home directory, where its Python finds its user site-packages."""
    return system_user(HOME_USER, home=f"/home/{HOME_USER}")


@pytest.fixture
def unprotected():
    """Debian's defaults before fs.protected_*: links, FIFOs and files in sticky directories are
    followed and opened whoever owns them."""
    names = ("protected_symlinks", "protected_hardlinks", "protected_fifos", "protected_regular")
    saved = {name: pathlib.Path("/proc/sys/fs", name).read_text() for name in names}
    for name in names:
        pathlib.Path("/proc/sys/fs", name).write_text("0")
    yield
    for name, value in saved.items():
        pathlib.Path("/proc/sys/fs", name).write_text(value)


def test_the_report_at_job_end_says_how_the_run_compares_with_its_applications_history(ioassess, site,
                                                                                      recorder_lib):
    """Ten earlier runs of dd in the site's store (the job's own record, as `ioassess report`
    makes it, at earlier ends and with other losses): the epilog's worker asks the parent (root,
    which alone reads the store) for dd's history, and the report has it: the runs, their median,
    the job's rank and the regression rule's verdict, in the JSON and on the page."""
    store = os.path.join(site.root, "fleet")
    traces = site.record_job(recorder_lib)
    own = make_report(traces, owner_uid=site.user.pw_uid)
    lost = own["headline"]["lost_high_s"]
    prior = [lost * factor for factor in (0.2, 3.0, 0.5, 0.4, 2.0, 0.3, 0.6, 0.1, 5.0, 0.5)]
    end = datetime.datetime.fromisoformat(own["job"]["end"])
    for number, seconds in enumerate(prior):
        record = job_record(own)
        record["job"].update(job_id=str(7000 + number), lost_high_s=seconds,
                             end=round((end - datetime.timedelta(hours=number + 1)).timestamp() * 1e6))
        spool_record(store, keyed(record))
    assert ioassess("fleet", "compact", "--store", store).returncode == 0
    result = epilog(ioassess, site.settings(fleet_store=store), site.slurm_environment())
    assert_one_line(site, result, f"wrote {site.report()} and {site.report(suffix='json')}; fleet record spooled")
    history = json.loads(pathlib.Path(site.report(suffix="json")).read_text())["history"]
    median, iqr = np.percentile(prior, 50), np.percentile(prior, 75) - np.percentile(prior, 25)
    assert (history["app"], history["runs"], history["rank"]) == ("dd", 10, 1 + sum(p > lost for p in prior))
    assert (history["median_lost_s"], history["iqr_lost_s"]) == (pytest.approx(median), pytest.approx(iqr))
    assert history["regression"] == (lost > median + 3 * iqr and lost > 1.5 * median)
    page = pathlib.Path(site.report()).read_text()
    assert f"its last 10 runs before this one lost a median of {seconds_text(median)}" in page


def test_the_parent_answers_only_a_question_of_the_right_form(tmp_path):
    """The worker's question is the user's to forge: what is not an application's name, an end
    and a number of seconds gets no answer (None), a well-formed one an answer."""
    store = tmp_path / "store"
    store.mkdir()
    good = {"app": "dd", "end": "2026-11-28T00:00:00+00:00", "lost_high_s": 1.5}
    assert answer_history(str(store), json.dumps(good).encode())["runs"] == 0
    for hostile in [b"", b"\xff", b"[]", json.dumps({**good, "lost_high_s": True}).encode(),
                    json.dumps({**good, "lost_high_s": "1"}).encode(), json.dumps({**good, "app": 5}).encode(),
                    json.dumps({**good, "app": "x" * 5000}).encode(), json.dumps({**good, "end": "soon"}).encode(),
                    b'{"app": "dd", "end": "2026-11-28", "lost_high_s": 1e999}']:
        assert answer_history(str(store), hostile) is None, hostile


def test_without_a_readable_store_the_report_has_no_history_and_is_still_written(ioassess, site, recorder_lib):
    site.record_job(recorder_lib)
    store = os.path.join(site.root, "no-store-yet")
    result = epilog(ioassess, site.settings(fleet_store=store), site.slurm_environment())
    assert_one_line(site, result, f"wrote {site.report()} and {site.report(suffix='json')}; fleet record spooled")
    assert json.loads(pathlib.Path(site.report(suffix="json")).read_text())["history"] is None


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

    def as_user(self, cmd, env, cwd=None, user=None):
        """cmd run as the job's user, or as `user`."""
        user = user or self.user
        return subprocess.run([str(c) for c in cmd], env=env, cwd=cwd or self.work, user=user.pw_uid,
                              group=user.pw_gid, extra_groups=[], capture_output=True, text=True, timeout=300)

    def record_job(self, recorder_lib, job=JOB, user=None):
        """A real program writes and syncs a file under the recorder, in the job, as the job's
        user (or as `user`, into the job's trace directory)."""
        env = clean_env({"LD_PRELOAD": recorder_lib, "IOASSESS_TRACE_DIR": self.trace_dir(job), "SLURM_JOB_ID": job})
        cwd = self.traces if user else self.work
        result = self.as_user([tool("dd"), "if=/dev/zero", "of=data", "bs=64k", "count=16", "conv=fsync"], env,
                              cwd=cwd, user=user)
        assert result.returncode == 0, result.stderr
        traces = [name for name in os.listdir(self.trace_dir(job)) if name.endswith(".iot")]
        assert traces, f"no trace in {self.trace_dir(job)}"
        return [os.path.join(self.trace_dir(job), name) for name in traces]

    def place_darshan_log(self, shipped, job, day=None, owner=None, exe="a.out"):
        """A shipped Darshan log where Darshan puts a log of this user and job: LOGPATH/year/
        month/day/<user>_<exe>_id<job>_<month>-<day>-<seconds>-<hash>.darshan, in day
        directories of mode 1777 as Darshan's; owned by the job's user, or by `owner`.
        shipped: a PyDarshan sample log, or bytes."""
        day = day or datetime.date.today()
        directory = self.darshan
        for part in (day.year, day.month, day.day):
            directory = os.path.join(directory, str(part))
            if not os.path.isdir(directory):
                os.makedirs(directory)
                os.chmod(directory, 0o1777)
        path = os.path.join(directory, f"{self.user.pw_name}_{exe}_id{job}_{day.month}-{day.day}-3600-1234.darshan")
        if isinstance(shipped, bytes):
            pathlib.Path(path).write_bytes(shipped)
        else:
            shutil.copyfile(get_log_path(shipped), path)
        owner = owner or self.user
        os.chown(path, owner.pw_uid, owner.pw_gid)
        os.chmod(path, 0o400)
        return path


@pytest.fixture
def make_site(installation_reachable):
    roots = []

    def make(user):
        roots.append(tempfile.mkdtemp(prefix="ioassess-epilog-", dir="/tmp"))
        os.chmod(roots[-1], 0o755)
        return Site(roots[-1], user)
    yield make
    for root in roots:
        shutil.rmtree(root)


@pytest.fixture
def site(make_site, job_user):
    return make_site(job_user)


@pytest.fixture
def user_site(home_user, installation_reachable):
    """The home user's site-packages directory, where `python -m site --user-site` says an
    interpreter with user site-packages on looks; made as the user, removed after the test."""
    env = clean_env({"HOME": home_user.pw_dir})
    found = subprocess.run([sys.executable, "-m", "site", "--user-site"], env=env, cwd="/", user=home_user.pw_uid,
                           group=home_user.pw_gid, extra_groups=[], capture_output=True, text=True, check=True)
    directory = found.stdout.strip()
    top = os.path.join(home_user.pw_dir, os.path.relpath(directory, home_user.pw_dir).split(os.sep)[0])
    assert top != home_user.pw_dir and not os.path.exists(top), f"{top}: left by an earlier run?"
    subprocess.run([tool("mkdir"), "-p", directory], cwd="/", user=home_user.pw_uid, group=home_user.pw_gid,
                   extra_groups=[], check=True)
    yield directory
    shutil.rmtree(top)


def plant(directory, name, text, user):
    """A file of the user's."""
    path = os.path.join(directory, name)
    pathlib.Path(path).write_text(text)
    os.chown(path, user.pw_uid, user.pw_gid)
    return path


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
        link, output = os.path.join(site.work, "reports"), "%w/reports/%j.html"
        refused = os.path.join(site.work, "reports")
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


def test_a_trace_another_user_planted_is_refused_and_named(ioassess, site, recorder_lib, tmp_path):
    """A real trace of the same job id and rank 0, but of another program and owned by another
    user (root), put into the job's trace directory: it must not become the job's headline."""
    own = site.record_job(recorder_lib)
    foreign = tmp_path / "foreign"
    env = clean_env({"LD_PRELOAD": recorder_lib, "IOASSESS_TRACE_DIR": str(foreign), "SLURM_JOB_ID": JOB,
                     "IOASSESS_RANK": "0"})
    subprocess.run([tool("cat"), "/etc/hostname"], env=env, check=True, capture_output=True)
    (trace,) = foreign.glob("*.iot")
    planted = os.path.join(site.trace_dir(), trace.name)
    shutil.copyfile(trace, planted)
    os.chmod(planted, 0o644)
    result = epilog(ioassess, site.settings(), site.slurm_environment())
    assert_one_line(site, result, f"wrote {site.report()}",
                    f"; 1 input left out, the first: {planted}: belongs to uid 0, not the job's user: left out")
    with open(site.report(suffix="json")) as f:
        job = json.load(f)["job"]
    assert os.path.basename(job["exe"]) == "dd" and job["processes_recorded"] == len(own)


def test_a_hundred_thousand_bogus_traces_are_one_line_and_the_good_ones_are_reported(ioassess, site, recorder_lib):
    """The job's user fills the trace directory with 100,000 files named as the job's traces:
    the report of the real trace is written, the log gets one line that counts them, and the
    report's notes summarise them (not one note per file, nor every note in every input)."""
    (own,) = site.record_job(recorder_lib)
    make_bogus = ("import os, sys\n"
                  "for i in range(100_000):\n"
                  "    with open(f'{sys.argv[1]}/ioassess_{sys.argv[2]}_node1_r0_p{i}_0.iot', 'wb') as f:\n"
                  "        f.write(b'not a trace')\n")
    made = site.as_user([sys.executable, "-c", make_bogus, site.trace_dir(), JOB], clean_env(), cwd="/")
    assert made.returncode == 0, describe(made)
    result = epilog(ioassess, site.settings(), site.slurm_environment())
    line = assert_one_line(site, result, f"wrote {site.report()}", "; 100000 inputs left out, the first: ",
                           ": not an ioassess trace (bad magic); and 99,999 more trace files that are not ioassess "
                           "traces, among them ")
    assert len(line) <= LOG_LINE_LIMIT + 100
    with open(site.report(suffix="json")) as f:
        job = json.load(f)["job"]
    assert job["processes_recorded"] == 1 and [entry["path"] for entry in job["inputs"]] == [own]
    assert len(job["notes"]) == 1


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
    assert_one_line(site, result,
                    "the report took longer than the time limit of 2 s and was stopped: no report written")
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
    show = ('eval "$($LMOD bash load ioassess)"; '
            'printf "%s\\n" "$IOASSESS_TRACE_DIR" "$LD_PRELOAD" "$PATH" "$PYTHONPATH"')
    base = {"PATH": "/usr/bin:/bin", "MODULEPATH": str(modules), "LMOD": LMOD, "USER": "alice", "HOME": str(tmp_path)}
    assert ioassess.mpiio_library_path(), "libioassess-mpiio.so was not built: `make deps` installs MPICH's mpicc"
    darshan_between = \
        f"{ioassess.mpiio_library_path()}:/opt/darshan/lib/libdarshan.so:{ioassess.recorder_library_path()}"
    package_parent = os.path.dirname(os.path.dirname(ioassess.__file__))
    for env, trace_dir, preload in (({"SLURM_JOB_ID": "77", "LD_PRELOAD": "/opt/darshan/lib/libdarshan.so"},
                                     "/scratch/ioassess/alice/77", darshan_between),
                                    ({}, "", "")):
        loaded = subprocess.run(["/bin/bash", "-c", show], env={**base, **env}, capture_output=True, text=True)
        assert loaded.returncode == 0, loaded.stderr
        assert loaded.stdout.splitlines() == [trace_dir, preload, f"{os.path.dirname(sys.executable)}:/usr/bin:/bin",
                                              package_parent], loaded.stdout


def test_the_spack_recipe_is_valid_python(tmp_path):
    """Compiled only: running it needs Spack, which is not installed here."""
    subprocess.run([sys.executable, "-m", "py_compile", str(REPO / "contrib" / "spack" / "package.py")], check=True,
                   env={**os.environ, "PYTHONPYCACHEPREFIX": str(tmp_path)})


def test_the_report_uses_the_model_of_the_site_or_the_one_the_user_calibrated(ioassess, make_site, home_user,
                                                                              recorder_lib, calibrated_model):
    """Without a model setting the job is judged by the model made where it ran: the site's
    (site_models), and the user's own (in the home: the worker has none of the job's environment)
    before it."""
    site = make_site(home_user)
    site_models = os.path.join(site.root, "site-models")
    os.mkdir(site_models)
    sites = shutil.copy(calibrated_model.path, site_models)
    site.record_job(recorder_lib)
    settings = site.settings(site_models=site_models)

    def chosen():
        assert_one_line(site, epilog(ioassess, settings, site.slurm_environment()), "wrote")
        os.unlink(site.log)
        with open(site.report(suffix="json")) as f:
            model = json.load(f)["model"]
        return model["source"], model["choice"]["match"]

    assert chosen() == (sites, "host and file system")
    models = os.path.join(home_user.pw_dir, ".local", "share", "ioassess", "models")
    made = models   # the first directory of the path that is not there: removed at the end
    while not os.path.exists(os.path.dirname(made)):
        made = os.path.dirname(made)
    assert not os.path.exists(made), f"{made}: left by an earlier run?"
    site.as_user([tool("mkdir"), "-p", models], clean_env({}), cwd="/")
    try:
        users = shutil.copy(calibrated_model.path, models)
        os.chown(users, home_user.pw_uid, home_user.pw_gid)
        assert chosen() == (users, "host and file system")
    finally:
        shutil.rmtree(made)


# ---- what a user, or another user, can do to the epilog ----

def test_the_worker_runs_none_of_the_users_python_code(ioassess, make_site, home_user, user_site, recorder_lib):
    """A .pth file in the user's site-packages runs in every Python the user starts with user
    site-packages on; the worker is started isolated (python -I) and does not run it."""
    site = make_site(home_user)
    ran = os.path.join(site.work, "pth-ran")
    plant(user_site, "hook.pth", f"import os; open({ran!r}, 'w').close()\n", home_user)
    plain = site.as_user([sys.executable, "-c", "pass"], clean_env({"HOME": home_user.pw_dir}))
    assert plain.returncode == 0 and os.path.exists(ran), \
        "the .pth is not run by a plain interpreter: " + describe(plain)
    os.unlink(ran)
    site.record_job(recorder_lib)
    result = epilog(ioassess, site.settings(), site.slurm_environment())
    assert_one_line(site, result, f"job {JOB} ({HOME_USER}): wrote {site.report()}")
    assert not os.path.exists(ran)


@pytest.fixture
def planted_template_module(planter):
    """A compiled report template in the cache user's own cache of compiled templates
    (/tmp/_jinja2-cache-UID, where Jinja2 looks, mode 0700, theirs), as the user could plant
    it: the real module with a line before it that makes the file it is given; removed after."""
    def plant_module(marker):
        environment = jinja2.Environment(loader=jinja2.FileSystemLoader(render.TEMPLATE_DIR), autoescape=True,
                                         undefined=jinja2.StrictUndefined)
        environment.filters.update(render.FILTERS)
        source, filename, _ = environment.loader.get_source(environment, "report.html.j2")
        module = environment.compile(source, "report.html.j2", filename, raw=True)
        cache = jinja2.FileSystemBytecodeCache(directory)
        bucket = cache.get_bucket(environment, "report.html.j2", filename, source)
        bucket.code = compile(f"open({marker!r}, 'w').close()\n{module}", filename, "exec")
        cache.set_bucket(bucket)
        planted.extend(os.path.join(directory, name) for name in os.listdir(directory))
        for path in planted:
            os.chown(path, planter.pw_uid, planter.pw_gid)

    directory = f"/tmp/_jinja2-cache-{planter.pw_uid}"
    planted = []
    if not os.path.isdir(directory):
        os.mkdir(directory, 0o700)
        os.chown(directory, planter.pw_uid, planter.pw_gid)
    yield plant_module
    for path in planted:
        os.unlink(path)


def test_the_worker_runs_no_compiled_template_the_user_planted(ioassess, make_site, planter, recorder_lib,
                                                                planted_template_module):
    """The report's template compiled into a module with a line of the user's added, in the
    user's own cache of compiled templates: the user's own `ioassess report` runs it (the cache
    is theirs), the epilog's worker compiles the template itself and runs none of it."""
    site = make_site(planter)
    ran = os.path.join(site.work, "template-module-ran")
    planted_template_module(ran)
    site.record_job(recorder_lib)
    own = site.as_user([sys.executable, "-m", "ioassess", "report", site.trace_dir(), "-o",
                        os.path.join(site.work, "own.html")], clean_env())
    assert own.returncode == 0 and os.path.exists(ran), "the planted module is not run by the user's report: " + \
        describe(own)
    os.unlink(ran)
    result = epilog(ioassess, site.settings(), site.slurm_environment())
    assert_one_line(site, result, f"job {JOB} ({PLANTER_USER}): wrote {site.report()}")
    assert not os.path.exists(ran)
    assert pathlib.Path(site.report()).read_text().rstrip().endswith("</html>")


# The epilog's peak resident size with its worker and the worker's children: a 200 MB model
# took 4.9 GB, a log inflating to 160 MB of DXT about 0.8 GB.
HOSTILE_INPUTS_PEAK_RSS_KIB = 500 * 1024


def test_the_users_huge_and_deep_models_and_inflating_log_cost_the_worker_bounded_memory(make_site, planter,
                                                                                         recorder_lib, darshan_util):  # noqa: F811
    """The job's user's model directory holds a model of 200 MB and one nested 400 deep, and its
    Darshan log of 0.4 MB inflates to 160 MB of DXT: neither model is read whole nor chosen, the
    log is read up to its bound, and the report is written in one line; the epilog, its worker
    and the worker's children peak under 500 MiB."""
    site = make_site(planter)
    models = os.path.join(planter.pw_dir, ".local", "share", "ioassess", "models")
    made = os.path.join(planter.pw_dir, ".local")
    assert not os.path.exists(made), f"{made}: left by an earlier run?"
    site.as_user([tool("mkdir"), "-p", models], clean_env({}), cwd="/")
    try:
        write_huge_model(os.path.join(models, "huge.json"))
        write_json(pathlib.Path(models, "deep.json"), mutated(set_in(["provenance", "generator"], nested(400))))
        for name in os.listdir(models):
            os.chown(os.path.join(models, name), planter.pw_uid, planter.pw_gid)
        traces = site.record_job(recorder_lib, job=DARSHAN_JOB)
        inflating = inflating_log(darshan_util, os.path.join(site.root, "inflating.darshan"), 1, 5_000_000)
        log = site.place_darshan_log(pathlib.Path(inflating).read_bytes(), DARSHAN_JOB)
        result, peak_kib = run_measured([sys.executable, "-m", "ioassess", "epilog", "--config",
                                         site.settings(darshan_logpath=site.darshan)],
                                        clean_env(site.slurm_environment(job=DARSHAN_JOB)))
    finally:
        shutil.rmtree(made)
    assert_one_line(site, result, f"wrote {site.report(DARSHAN_JOB)} and {site.report(DARSHAN_JOB, suffix='json')}")
    assert peak_kib < HOSTILE_INPUTS_PEAK_RSS_KIB, f"peak {peak_kib // 1024} MiB"
    assessment = json.loads(pathlib.Path(site.report(DARSHAN_JOB, suffix="json")).read_text())
    assert not assessment["model"]["source"].startswith(models)
    inputs = {i["path"]: i for i in assessment["job"]["inputs"]}
    assert sorted(inputs) == sorted(traces + [log])
    assert inputs[log]["notes"][0].startswith("The log's records inflate to more than the 128.0 MiB ")


# Run by a user's .pth in a worker that does not ignore it: a daemon in a session of its own
# that holds the worker's output open, lines forged as the epilog's, and a flood of output.
HOSTILE = """
import os, time
ready_read, ready_write = os.pipe()
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        with open({pidfile!r}, "w") as f:
            f.write(str(os.getpid()))
        os.execv("/bin/sleep", ["sleep", "100000"])
    os._exit(0)
os.close(ready_write)
os.read(ready_read, 1)   # end of file: the daemon has written its pid and exec'd
os.write(1, b"2026-01-01T00:00:00 node1 ioassess epilog[1]: job {job} (root): wrote /etc/shadow\\n")
chunk = b"x" * (1 << 20)
for _ in range({flood_mib}):
    os.write(1, chunk)
while {mode!r} == "overruns":
    os.write(1, chunk)
if {mode!r} == "forges the result":   # a result of its own on the worker's result pipe, the worker's to /dev/null
    import fcntl, json, stat
    for fd in range(3, 64):
        try:
            if stat.S_ISFIFO(os.fstat(fd).st_mode) and fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_ACCMODE == os.O_WRONLY:
                os.write(fd, json.dumps({{"outcome": "forged\\nline " + "x" * 10000, "left_out": 0,
                                          "first_left_out": ""}}).encode())
                os.dup2(os.open("/dev/null", os.O_WRONLY), fd)
        except OSError:
            pass
"""
FLOOD_MIB = 256
# The epilog's own peak resident size; reading all of the flood would take more than FLOOD_MIB.
PARENT_RSS_LIMIT_MIB = 120
# The epilog, with its worker started as it was before the worker was isolated: user
# site-packages on and HOME the user's; prints its peak resident size (VmHWM, KiB: that of its
# own program, where getrusage's ru_maxrss would count the test's process it was forked from).
NOT_ISOLATED = """
import sys
import ioassess.cli, ioassess.site.epilog as epilog
home = sys.argv.pop(1)
epilog.worker_command = lambda *fds: ["/usr/bin/env", "HOME=" + home, sys.executable, "-c",
                                      epilog.WORKER_BOOTSTRAP, epilog.PACKAGE_PARENT, *map(str, fds)]
status = ioassess.cli.main(sys.argv[1:])
with open("/proc/self/status") as f:
    print(next(line.split()[1] for line in f if line.startswith("VmHWM:")))
sys.exit(status)
"""


@pytest.mark.parametrize("mode", ["finishes", "overruns", "forges the result"])
def test_code_in_the_worker_leaves_no_process_forges_no_line_and_floods_no_memory(
        make_site, home_user, user_site, recorder_lib, mode):
    """User code in a worker that runs it (as the worker did before `python -I`): its daemon is
    ended, its 256 MiB of output and its lines dressed as the epilog's are read and dropped, the
    worker finishes (or is stopped at the limit), and the log has one line, the epilog's. A
    result it sends in place of the worker's is still one line, escaped and cut to the limit."""
    site = make_site(home_user)
    pidfile = os.path.join(site.root, "daemon.pid")
    os.chmod(site.root, 0o1777)
    plant(user_site, "hostile.py", HOSTILE.format(pidfile=pidfile, job=JOB, flood_mib=FLOOD_MIB, mode=mode), home_user)
    plant(user_site, "hook.pth", f"import runpy; runpy.run_path({os.path.join(user_site, 'hostile.py')!r})\n",
          home_user)
    site.record_job(recorder_lib)
    overrun = mode == "overruns"
    time_limit = "8" if overrun else "120"
    result = subprocess.run([sys.executable, "-c", NOT_ISOLATED, home_user.pw_dir, "epilog", "--config",
                             site.settings(time_limit=time_limit), "--json", ""],
                            env=clean_env(site.slurm_environment()), cwd="/", capture_output=True, text=True,
                            timeout=300)
    outcome = {"finishes": f"wrote {site.report()}",
               "overruns": f"the report took longer than the time limit of {time_limit} s and was stopped",
               "forges the result": "forged\\x0aline xxx"}[mode]
    line = assert_one_line(site, result, f"job {JOB} ({HOME_USER}): {outcome}")
    if mode == "forges the result":
        assert len(line.split(": ", 1)[1]) == LOG_LINE_LIMIT and line.endswith(" more characters)"), line
    assert "/etc/shadow" not in result.stderr
    assert os.path.exists(pidfile), "the .pth did not run in the worker"
    assert _processes_of(home_user.pw_uid) == []
    assert os.path.exists(site.report()) != overrun
    assert int(result.stdout) < PARENT_RSS_LIMIT_MIB * 1024, f"the epilog grew to {int(result.stdout) // 1024} MiB"


def _processes_of(uid):
    return [pid for pid in os.listdir("/proc") if pid.isdigit() and _owner(pid) == uid]


def test_darshan_logs_planted_by_another_user_or_of_another_job_are_left_out(ioassess, site, attacker, recorder_lib):
    """Darshan's day directories are writable by all: the attacker's larger garbage log and
    its copy of another job's log, and a log of the user's own of another job, are left out;
    the report of the job's traces and its own log is written."""
    traces = site.record_job(recorder_lib, job=DARSHAN_JOB)
    good = site.place_darshan_log("sample-dxt-simple.darshan", DARSHAN_JOB)
    planted = site.place_darshan_log(os.urandom(1 << 20), DARSHAN_JOB, owner=attacker, exe="big")
    site.place_darshan_log("sample.darshan", DARSHAN_JOB, owner=attacker, exe="other")
    site.place_darshan_log("sample.darshan", DARSHAN_JOB, exe="mine")
    result = epilog(ioassess, site.settings(darshan_logpath=site.darshan), site.slurm_environment(job=DARSHAN_JOB))
    assert_one_line(site, result, f"wrote {site.report(DARSHAN_JOB)} and {site.report(DARSHAN_JOB, suffix='json')}; "
                                  f"3 inputs left out, the first: {planted}: belongs to uid {attacker.pw_uid}, "
                                  "not the job's user: left out")
    with open(site.report(DARSHAN_JOB, suffix="json")) as f:
        assessment = json.load(f)
    assert sorted((i["path"], i["kind"]) for i in assessment["job"]["inputs"]) == \
        sorted([(t, "trace") for t in traces] + [(good, "darshan")])


def test_a_file_named_as_the_jobs_darshan_log_today_does_not_hide_its_log_of_yesterday(ioassess, site, attacker):
    """Another user makes a file named as the job's log in today's day directory (mode 1777);
    the job's log is in yesterday's. Every day directory is searched and the owner checked
    before anything is decided: the job's log is reported, the planted file left out."""
    yesterday = datetime.date.today() - datetime.timedelta(days=1)
    log = site.place_darshan_log("sample-dxt-simple.darshan", DARSHAN_JOB, day=yesterday)
    planted = site.place_darshan_log(b"not a log", DARSHAN_JOB, owner=attacker)
    assert stat.S_IMODE(os.stat(os.path.dirname(planted)).st_mode) == 0o1777
    result = epilog(ioassess, site.settings(darshan_logpath=site.darshan, darshan_days="1"),
                    site.slurm_environment(job=DARSHAN_JOB))
    assert_one_line(site, result, f"wrote {site.report(DARSHAN_JOB)} and {site.report(DARSHAN_JOB, suffix='json')}; "
                                  f"1 input left out, the first: {planted}: belongs to uid {attacker.pw_uid}, "
                                  "not the job's user: left out")
    with open(site.report(DARSHAN_JOB, suffix="json")) as f:
        assessment = json.load(f)
    assert [(i["path"], i["kind"]) for i in assessment["job"]["inputs"]] == [(log, "darshan")]


@pytest.mark.parametrize("planter", ["attacker", "user"])
def test_a_darshan_log_of_another_job_does_not_become_the_jobs_report(ioassess, site, attacker, planter):
    owner = attacker if planter == "attacker" else site.user
    log = site.place_darshan_log("sample.darshan", DARSHAN_JOB, owner=owner)
    result = epilog(ioassess, site.settings(darshan_logpath=site.darshan), site.slurm_environment(job=DARSHAN_JOB))
    problem = (f"belongs to uid {attacker.pw_uid}, not the job's user" if planter == "attacker"
               else f"the log of job 4478544, not of job {DARSHAN_JOB}")
    assert_one_line(site, result, "nothing to report: no trace", f"; 1 input left out, the first: {log}: {problem}")
    assert not os.path.exists(site.report(DARSHAN_JOB))


def test_traces_another_user_wrote_into_the_jobs_trace_directory_are_left_out(ioassess, site, attacker, recorder_lib):
    """The trace root is writable by all: the attacker makes the job's trace directory before
    the job does and records a program of its own there under the job's id."""
    planted = site.record_job(recorder_lib, user=attacker)
    shared = site.as_user([tool("chmod"), "-R", "go+rX", os.path.dirname(site.trace_dir())], clean_env(), cwd="/",
                          user=attacker)
    assert shared.returncode == 0, describe(shared)
    result = epilog(ioassess, site.settings(), site.slurm_environment())
    assert_one_line(site, result, f"nothing to report: no trace {site.trace_dir()}/ioassess_{JOB}_*.iot; "
                                  f"1 input left out, the first: {planted[0]}: belongs to uid {attacker.pw_uid}, "
                                  "not the job's user: left out")
    assert not os.path.exists(site.report())


@pytest.mark.parametrize("planted, problem", [
    ("fifo", "not a regular file (a FIFO or socket)"),
    ("file", "belongs to uid {attacker}, not root"),
    ("hard link", "has 2 hard links")])
def test_a_fifo_or_another_users_file_at_the_log_path_gets_no_line(ioassess, site, attacker, recorder_lib,
                                                                   unprotected, planted, problem):
    """The log's directory is writable by all; the attacker puts there a FIFO nobody reads
    (opening it for writing would block for good), a file of its own, or a hard link to a file
    of root's. The epilog does not write to any of them, says so on stderr, and reports."""
    site.record_job(recorder_lib)
    log_dir = os.path.join(site.root, "log")
    os.mkdir(log_dir)
    os.chmod(log_dir, 0o1777)
    log = os.path.join(log_dir, "epilog.log")
    roots_file = os.path.join(site.root, "roots-file")
    pathlib.Path(roots_file).write_text("root's\n")
    command = {"fifo": [tool("mkfifo"), "-m", "666", log], "file": [tool("install"), "-m", "666", "/dev/null", log],
               "hard link": [tool("ln"), roots_file, log]}[planted]
    made = site.as_user(command, clean_env(), cwd="/", user=attacker)
    assert made.returncode == 0, describe(made)
    result = epilog(ioassess, site.settings(log=log, json=""), site.slurm_environment())
    assert result.returncode == 0, describe(result)
    lines = result.stderr.splitlines()
    assert len(lines) == 2, lines
    assert lines[0].endswith(f"{log}: not used as the log: {problem.format(attacker=attacker.pw_uid)}; "
                             "the lines go to syslog and stderr"), lines
    assert lines[1].endswith(f"job {JOB} ({USER}): wrote {site.report()}"), lines
    if planted != "fifo":
        assert pathlib.Path(log).read_text() == ("" if planted == "file" else "root's\n")


CONTROL_NAME = "ioassess_4242_\x1b]0;owned\x07\x1b[2J\r\n2026-01-01 forged\u202egol.iot"


def test_the_log_line_escapes_control_characters_in_file_names(ioassess, site, recorder_lib):
    """The user names a link as a trace of the job with terminal controls, a line break and a
    line of the log's, and U+202E (right-to-left override) in its name."""
    site.record_job(recorder_lib)
    link = os.path.join(site.trace_dir(), CONTROL_NAME)
    os.symlink("/etc/passwd", link)
    os.lchown(link, site.user.pw_uid, site.user.pw_gid)
    result = epilog(ioassess, site.settings(json=""), site.slurm_environment())
    escaped = (f"{site.trace_dir()}/ioassess_4242_\\x1b]0;owned\\x07\\x1b[2J\\x0d\\x0a2026-01-01 forged"
               "\\u202egol.iot")
    assert_one_line(site, result, f"wrote {site.report()}; 1 input left out, the first: {escaped}: "
                                  "not a regular file: left out")
    assert not any(char in pathlib.Path(site.log).read_text() for char in "\x1b\x07\r\u202e")


@pytest.mark.parametrize("member", [True, False], ids=["member", "not a member"])
def test_report_group_shares_the_reports_with_a_group_the_user_is_in(ioassess, site, recorder_lib, member):
    group = "ioassess-readers" if member else "ioassess-others"
    if subprocess.run([tool("getent"), "group", group], capture_output=True).returncode != 0:
        subprocess.run([tool("groupadd"), "--system", group], check=True, capture_output=True)
    if member:
        subprocess.run([tool("gpasswd"), "--add", USER, group], check=True, capture_output=True)
    gid = grp.getgrnam(group).gr_gid
    site.record_job(recorder_lib)
    result = epilog(ioassess, site.settings(report_group=group), site.slurm_environment())
    reports = f"wrote {site.report()} and {site.report(suffix='json')}"
    assert_one_line(site, result, reports if member else f"{reports} (mode 0600: the job's user is not in "
                                                         f"report_group {group})")
    for path in (site.report(), site.report(suffix="json")):
        status = os.stat(path)
        assert (stat.S_IMODE(status.st_mode), status.st_gid == gid) == ((0o640, True) if member else (0o600, False))


def test_the_worker_runs_in_a_cgroup_of_its_own_that_is_removed_after(site, recorder_lib):
    """Where a cgroup v2 can be made (as root, with cgroup2 mounted, as here), the worker is
    moved into one of its own before it has its work, so that cgroup.kill ends all it starts,
    and, where the memory controller is v1's (as here), into a memory cgroup of its own too;
    seen while the worker blocks opening a FIFO as its model, until the time limit."""
    with open("/proc/self/mounts") as mounts:
        assert any(fields[2] == "cgroup2" for fields in map(str.split, mounts)), "no cgroup2 file system mounted"
    site.record_job(recorder_lib)
    fifo = os.path.join(site.root, "model.json")
    os.mkfifo(fifo, 0o644)
    settings = site.settings(model=fifo, time_limit="5")
    epilog_process = subprocess.Popen([sys.executable, "-m", "ioassess", "epilog", "--config", settings], cwd="/",
                                      env=clean_env(site.slurm_environment()), stderr=subprocess.PIPE, text=True)
    cgroup_name = f"ioassess-epilog-{epilog_process.pid}"
    # the worker enters the cgroup v2 first, the v1 memory cgroup a moment later: both are waited for
    seen = set()
    while not {"", "memory"} <= {controllers for _, controllers, _ in seen} and epilog_process.poll() is None:
        seen |= {tuple(line.split(":", 2)) for pid in _processes_of(site.user.pw_uid) for line in _cgroups(pid)
                 if line.endswith(f"/{cgroup_name}")}
    _, stderr = epilog_process.communicate(timeout=300)
    assert {controllers for _, controllers, _ in seen} >= {"", "memory"}, \
        f"no process of {USER} was seen in cgroups {cgroup_name}: {seen}; the epilog said: {stderr}"
    assert "the report took longer than the time limit of 5 s" in stderr
    for _, controllers, path in seen:
        mount = next(fields[1] for fields in map(str.split, open("/proc/self/mounts"))
                     if (fields[2], controllers) == ("cgroup2", "") or controllers in fields[3].split(","))
        assert not os.path.exists(os.path.join(mount, path.lstrip("/")))
    assert _processes_of(site.user.pw_uid) == []


@pytest.mark.parametrize("limit", ["20M", "4G"])
def test_the_memory_limit_stops_a_report_that_needs_more_in_one_line(ioassess, site, recorder_lib, limit):
    """The worker's cgroup has memory_limit (a memory cgroup of v2, or of v1 beside it as here): a
    report that needs more (20 MiB: less than the report's modules) is stopped, in one line, no
    report is written and nothing of the worker is left; with the default limit the same job's
    report is written."""
    site.record_job(recorder_lib)
    result = epilog(ioassess, site.settings(memory_limit=limit), site.slurm_environment())
    if limit == "4G":
        assert_one_line(site, result, f"wrote {site.report()}")
        return
    assert_one_line(site, result, "the report needed more memory than the memory limit of 20.0 MiB (memory_limit) "
                                  "and was stopped: no report written")
    assert not os.path.exists(site.report()) and not os.path.exists(site.report(suffix="json"))
    assert _processes_of(site.user.pw_uid) == []


def _cgroups(pid):
    try:
        with open(f"/proc/{pid}/cgroup") as f:
            return f.read().splitlines()
    except (FileNotFoundError, ProcessLookupError):   # gone before it was opened, or while read
        return []


def test_the_report_quotes_the_probe_store_the_settings_name(ioassess, site, recorder_lib):
    """probe_db reaches the worker, which reads root's store (mode 0644) as the job's user."""
    os.mkdir(os.path.join(site.root, "fs"))
    db = os.path.join(site.root, "probe.sqlite")
    probed = ioassess("probe", "run", "--dir", os.path.join(site.root, "fs"), "--db", db, "--data-size", "2M",
                      "--pool-files", "5", "--interval", "0.01s", "--rounds", "3")
    assert probed.returncode == 0, probed.stderr
    site.record_job(recorder_lib)
    result = epilog(ioassess, site.settings(probe_db=db), site.slurm_environment())
    assert_one_line(site, result, f"wrote {site.report()} and {site.report(suffix='json')}")
    section = json.loads(pathlib.Path(site.report(suffix="json")).read_text())["file_system"]
    assert (section["store"], section["problem"]) == (db, None)
    assert [target["target"] for target in section["targets"]] == [os.path.join(site.root, "fs")]


def test_the_jobs_record_is_spooled_for_the_site_store_under_slurms_id_and_user(ioassess, site, recorder_lib):
    store = os.path.join(site.root, "fleet")
    site.record_job(recorder_lib)
    result = epilog(ioassess, site.settings(fleet_store=store), site.slurm_environment())
    assert_one_line(site, result, f"wrote {site.report()} and {site.report(suffix='json')}; fleet record spooled")
    spooled = os.listdir(os.path.join(store, "spool"))
    assert len(spooled) == 1 and spooled[0].startswith(f"{JOB}-")
    status = os.lstat(os.path.join(store, "spool", spooled[0]))
    assert (status.st_uid, stat.S_IMODE(status.st_mode)) == (0, 0o600)
    assert ioassess("fleet", "compact", "--store", store).returncode == 0
    result = ioassess("fleet", "sql", "SELECT job_key, job_id, user, app, report, lost_high_s FROM jobs", "--store",
                      store, "--format", "json")
    assert result.returncode == 0, result.stderr
    [row] = json.loads(result.stdout)
    assessment = json.loads(pathlib.Path(site.report(suffix="json")).read_text())
    assert (row["job_key"], row["job_id"], row["user"], row["app"], row["report"]) == (JOB, JOB, USER, "dd",
                                                                                       site.report())
    assert row["lost_high_s"] == assessment["headline"]["lost_high_s"]
