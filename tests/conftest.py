"""The tests exercise this checkout: its ioassess package (ioassess/models and ioassess/report are
links to models/ and report/) with the recorder compiled into ioassess/lib (`make build`; `make
test` also installs the checkout with `pip install -e .`, so that the `ioassess` command and
every process the tests start, whatever its directory or user, run the same code). The
repository root goes first on sys.path and into PYTHONPATH here, before anything imports
ioassess. IOASSESS_CHECK_SCHEMA=1 is set here for the session: every assessment the tests make,
in this process or in one they start, is checked against report/assessment.schema.json.

Shared fixtures for tests that run real programs under the real recorder:

    recorder_lib   path of the installed libioassess.so (ioassess.recorder_library_path()).
    run_recorded   run_recorded(cmd, trace_dir, env=None) runs the argument list cmd (no shell)
                   with the recorder preloaded and its traces going to trace_dir (created if
                   needed). The environment is the test's own without LD_PRELOAD and IOASSESS_*
                   variables, plus env (an LD_PRELOAD given there is kept in front of the
                   recorder). Returns the subprocess.CompletedProcess with text stdout and stderr
                   captured; never raises on a non-zero exit status.
    ioassess       ioassess(*args, cwd=None, env=None) runs the installed command line as a user
                   does (python -m ioassess from a directory without a source tree).
    start_ioassess the same, started: a subprocess.Popen with text pipes for stdin, stdout, stderr.

For tests that need a second, unprivileged user (they run as root):

    job_user       the passwd entry of TEST_USER, created with useradd if missing (module scope).
    installation_reachable
                   lets others search the directories above the installed Python, ioassess and
                   PyDarshan until the module's tests are done, so that TEST_USER can run them.
    searchable_tmp a fresh directory under /tmp that every user can search (pytest's tmp_path is
                   under root's private one), removed after the test.

A GlusterFS volume (tests/glusterfs.py; its tests are marked `glusterfs` and `root` by themselves):

    glusterfs_volume
                   a one-brick volume served by a glusterd of its own and mounted with the FUSE
                   client, made once per module and torn down after it (no mount, no GlusterFS
                   process left): .mount the mount point (fuse.glusterfs, every user may make
                   files there), .name the volume, .brick the brick's directory (the server's
                   copy of the files), .gluster(*args) the CLI against its glusterd. Fails (never
                   skips) when GlusterFS cannot be set up: not root, no packages and no apt-get,
                   port 24007 taken by another glusterd.

A cause model of the machine the tests run on (tests that compare durations with a model use
it, never a shipped model trained elsewhere):

    calibrated_model
                   made once per session by `ioassess calibrate` run as TEST_USER in a directory
                   of its own under /tmp (the file system of pytest's tmp_path): .path the model
                   file (in .data_home/ioassess/models, XDG_DATA_HOME of the run), .work_dir the
                   --dir given, .result the CompletedProcess, .started/.ended its time.time().
"""
import contextlib
import os
import pathlib
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time
import types

import darshan
import pytest

REPO = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))

import ioassess as installed_package  # noqa: E402  (after the path fix above)
from ioassess.report.schema import CHECK_SCHEMA_ENV  # noqa: E402

from recorder_helpers import TEST_USER, is_ioassess_setting, system_user  # noqa: E402

# Every assessment the tests make, here or in a process they start (which inherits it: see
# is_ioassess_setting), is checked against its JSON Schema (report/schema.py).
os.environ[CHECK_SCHEMA_ENV] = "1"

RUN_TIMEOUT_S = 300
JOB_ID_VARIABLES = ("SLURM_JOB_ID", "PBS_JOBID", "LSB_JOBID", "FLUX_JOB_ID")
if not pathlib.Path(installed_package.__file__).resolve().is_relative_to(REPO):
    raise RuntimeError(f"the tests must import this checkout's ioassess, not {installed_package.__file__}")


# A test run started in the background of a shell inherits SIGINT and SIGQUIT ignored, and every
# program the tests start would too: the tests that send them need them as a job has them.
for signum, handler in ((signal.SIGINT, signal.default_int_handler), (signal.SIGQUIT, signal.SIG_DFL)):
    if signal.getsignal(signum) == signal.SIG_IGN:
        signal.signal(signum, handler)

# Fixtures that act as or for TEST_USER, or mount file systems: their tests run as root (marker
# `root`).
ROOT_FIXTURES = {"job_user", "installation_reachable", "searchable_tmp", "calibrated_model", "users", "mounts",
                 "glusterfs_volume"}
# Fixtures of a GlusterFS volume: their tests are marked `glusterfs` too.
GLUSTERFS_FIXTURES = {"glusterfs_volume"}


def pytest_collection_modifyitems(items):
    for item in items:
        if ROOT_FIXTURES & set(item.fixturenames):
            item.add_marker(pytest.mark.root)
        if GLUSTERFS_FIXTURES & set(item.fixturenames):
            item.add_marker(pytest.mark.glusterfs)


@pytest.fixture(scope="session")
def recorder_lib():
    installed = installed_package.recorder_library_path()
    if not os.path.isfile(installed):
        pytest.fail(f"{installed} is missing: build it with `make build` (make test does)")
    return installed


@pytest.fixture
def run_recorded(recorder_lib):
    def run(cmd, trace_dir, env=None):
        os.makedirs(trace_dir, mode=0o700, exist_ok=True)
        inherited = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD" and not is_ioassess_setting(k)}
        full_env = {**inherited, **(env or {})}
        preload = [full_env["LD_PRELOAD"]] if full_env.get("LD_PRELOAD") else []
        full_env["LD_PRELOAD"] = ":".join(preload + [recorder_lib])
        full_env["IOASSESS_TRACE_DIR"] = os.path.abspath(trace_dir)
        return subprocess.run([str(arg) for arg in cmd], env=full_env, capture_output=True, text=True,
                              timeout=RUN_TIMEOUT_S)
    return run


def _installed_cli(args, env):
    """The argument list and environment of the installed CLI run as a user runs it, with no
    batch-system or recorder variables from outside."""
    base = {k: v for k, v in os.environ.items()
            if k not in JOB_ID_VARIABLES and k != "LD_PRELOAD" and not is_ioassess_setting(k)}
    return [sys.executable, "-m", "ioassess", *map(str, args)], {**base, **(env or {})}


@pytest.fixture
def ioassess(recorder_lib):
    """ioassess(*args, cwd=None, env=None) runs the installed CLI as a user does (python -m ioassess
    from a directory without a source tree), with no batch-system or recorder variables from
    outside."""
    def run(*args, cwd=None, env=None, **popen_options):
        argv, full_env = _installed_cli(args, env)
        return subprocess.run(argv, cwd=cwd or "/", env=full_env, capture_output=True, text=True, timeout=300,
                              **popen_options)
    return run


@pytest.fixture
def start_ioassess(recorder_lib):
    """start_ioassess(*args, cwd=None, env=None, **popen_options) starts the installed CLI as
    ioassess() runs it, as a subprocess.Popen with text pipes for stdin, stdout and stderr."""
    def start(*args, cwd=None, env=None, **popen_options):
        argv, full_env = _installed_cli(args, env)
        return subprocess.Popen(argv, cwd=cwd or "/", env=full_env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, **popen_options)
    return start


@pytest.fixture(scope="module")
def job_user():
    """The unprivileged user TEST_USER (created if missing): the tests run as root."""
    return system_user(TEST_USER)


@pytest.fixture(scope="module")
def installation_reachable(job_user):
    """Let others search the directories above the installed Python and ioassess that they
    cannot (e.g. /root of a pyenv install), until the module's tests are done."""
    with reachable_installation():
        yield


@contextlib.contextmanager
def reachable_installation():
    """installation_reachable's work, for a with block."""
    changed = {}
    for path in (os.path.realpath(sys.executable), installed_package.__file__, darshan.__file__):
        directory = os.path.dirname(path)
        while directory != "/":
            mode = os.stat(directory).st_mode
            if not mode & stat.S_IXOTH and directory not in changed:
                changed[directory] = stat.S_IMODE(mode)
                os.chmod(directory, stat.S_IMODE(mode) | stat.S_IXOTH)
            directory = os.path.dirname(directory)
    try:
        yield
    finally:
        for directory, mode in changed.items():
            os.chmod(directory, mode)


@pytest.fixture(scope="session")
def calibrated_model(recorder_lib):
    """The model `ioassess calibrate` makes of this machine, as TEST_USER (see the module doc)."""
    user = system_user(TEST_USER)
    base = pathlib.Path(tempfile.mkdtemp(prefix="ioassess-calibrated-", dir="/tmp"))
    os.chmod(base, 0o755)
    work_dir, data_home, tmp_dir = base / "work", base / "data", base / "tmp"
    for directory in (work_dir, data_home, tmp_dir):
        directory.mkdir()
        os.chown(directory, user.pw_uid, user.pw_gid)
    # no --dir: the default, the current directory (work_dir), as a user types it
    argv, env = _installed_cli(["calibrate"], {"HOME": str(base), "XDG_DATA_HOME": str(data_home),
                                               "TMPDIR": str(tmp_dir)})
    started = time.time()
    with reachable_installation():
        result = subprocess.run(argv, cwd=work_dir, env=env, capture_output=True, text=True, timeout=RUN_TIMEOUT_S,
                                user=user.pw_uid, group=user.pw_gid, extra_groups=[])
    ended = time.time()
    assert result.returncode == 0, result.stderr
    (path,) = (data_home / "ioassess" / "models").iterdir()
    yield types.SimpleNamespace(path=path, work_dir=work_dir, data_home=data_home, tmp_dir=tmp_dir, result=result,
                                started=started, ended=ended, user=user)
    shutil.rmtree(base)


@pytest.fixture
def searchable_tmp():
    """A fresh directory under /tmp that every user can search, removed after the test."""
    path = tempfile.mkdtemp(prefix="ioassess-test-", dir="/tmp")
    os.chmod(path, 0o755)
    yield pathlib.Path(path)
    shutil.rmtree(path)


@pytest.fixture(scope="module")
def glusterfs_volume():
    """A mounted one-brick GlusterFS volume for the module's tests (see the module doc)."""
    import glusterfs
    try:
        with glusterfs.volume() as vol:
            yield vol
    except glusterfs.Unavailable as error:
        pytest.fail(f"GlusterFS cannot be set up: {error}")
