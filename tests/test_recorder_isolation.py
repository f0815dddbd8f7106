"""The recorder writes its traces and nothing else, whatever the application and other users do.

- An application that swaps files under descriptor numbers (dup2, also as raw system calls)
  while its threads do I/O never has one of its files written by the recorder.
- A trace directory someone else could change (planted by another user in a shared trace
  root, writable by others, a symbolic link, a file) turns the recorder off, the program
  unaffected; a trace replaced by another file while the program runs is not written again.
- A set-user-ID program does not record.

The users are real: the job's user `ioassess-test` (as in tests/test_epilog.py) and an
attacker `ioassess-attacker`, both created when missing; their programs run from a directory
under /tmp that every user can search.
"""
import os
import pathlib
import shutil
import stat
import subprocess
import sys
import tempfile
import textwrap

import pytest

from recorder_helpers import (ATTACKER_USER, TEST_USER, assert_same_run, clean_env, describe, load, prog, run,
                              system_user, tool, trace_files)

VICTIM_PATTERN = bytes((i * 131 + 7) & 0xFF for i in range(256))  # fdswap's: byte i of the victim
FDSWAP_THREADS = 160


# ---------------------------------------------------------------------------------------------
# an application swapping files under descriptor numbers


def fdswap_run(victim, work, trace_dir, recorder_lib, ops):
    return run([prog("fdswap"), victim, work, ops], preload=[recorder_lib], trace_dir=trace_dir)


@pytest.mark.parametrize("victim_bytes", [64 << 20, 4096])
def test_swapping_descriptors_never_touches_another_file(tmp_path, recorder_lib, victim_bytes):
    """fdswap's thread dup2()s a victim file onto descriptors 3..9 and closes them, as the
    recorder opens its trace there to grow it, while 160 threads pwrite. Before the recorder
    opened its trace in a helper with a private descriptor table, one run in a few wrote zeros
    and a CLOCK slot into the 64 MiB victim, and mapped the 4 KiB one past its end (SIGBUS)."""
    victim = tmp_path / "victim"
    original = VICTIM_PATTERN * (victim_bytes // len(VICTIM_PATTERN))
    victim.write_bytes(original)
    ops = 2000
    for attempt in range(10):
        work, traces = tmp_path / f"work{attempt}", tmp_path / f"traces{attempt}"
        work.mkdir()
        rec = fdswap_run(victim, work, traces, recorder_lib, ops)
        assert victim.read_bytes() == original, f"run {attempt}: the recorder wrote into the victim file"
        assert rec.returncode == 0 and rec.stdout == f"writes {FDSWAP_THREADS * ops} victim ok\n".encode(), (
            f"run {attempt}: {describe(rec)}")
        if attempt < 9:
            shutil.rmtree(traces)
            shutil.rmtree(work)
    # the last run's trace: every pwrite recorded or counted as lost
    ts = load(traces)
    (process,) = ts.processes
    pwrites = int((ts.ops["op"] == 4).sum()) + int(ts.summary["count"][ts.summary["op"] == 4].sum())
    assert pwrites + process.ops_lost == FDSWAP_THREADS * ops


# ---------------------------------------------------------------------------------------------
# trace directories


@pytest.fixture(scope="module")
def users():
    return system_user(TEST_USER), system_user(ATTACKER_USER)


@pytest.fixture
def shared(recorder_lib, users):
    """A directory under /tmp every user can search, with a copy of the recorder in it."""
    root = pathlib.Path(tempfile.mkdtemp(prefix="ioassess-isolation-", dir="/tmp"))
    os.chmod(root, 0o755)
    shutil.copy(recorder_lib, root / "libioassess.so")
    yield root
    shutil.rmtree(root)


def as_user(user, cmd, env, cwd):
    return subprocess.run([str(c) for c in cmd], env=clean_env(env), cwd=cwd, user=user.pw_uid, group=user.pw_gid,
                          extra_groups=[], capture_output=True, timeout=120)


def dd_without_rate(output):
    return b"\n".join(line for line in output.splitlines() if b" copied, " not in line)


def user_dir(path, user, mode):
    path.mkdir()
    os.chown(path, user.pw_uid, user.pw_gid)
    os.chmod(path, mode)
    return path


def plant(kind, path, victim, attacker, shared):
    """What the attacker (or an accident) left where the victim's trace directory goes."""
    if kind in ("attacker_0777", "above_attacker_0777"):
        user_dir(path, attacker, 0o777)
    elif kind == "attacker_0700":
        user_dir(path, attacker, 0o700)
    elif kind == "own_0777":
        user_dir(path, victim, 0o777)
    elif kind == "own_group_writable":
        user_dir(path, victim, 0o770)
    elif kind == "symlink":
        target = user_dir(shared / "elsewhere", victim, 0o700)
        path.symlink_to(target)
        os.lchown(path, attacker.pw_uid, attacker.pw_gid)
    elif kind == "file":
        path.write_bytes(b"not a directory\n")
        os.chown(path, victim.pw_uid, victim.pw_gid)


PLANTED = ["attacker_0777", "above_attacker_0777", "attacker_0700", "own_0777", "own_group_writable", "symlink",
           "file"]


@pytest.mark.parametrize("configured", ["IOASSESS_TRACE_DIR", "default"])
@pytest.mark.parametrize("kind", PLANTED + ["own_0700", "nothing"])
def test_a_trace_directory_others_can_change_is_not_used(shared, users, kind, configured):
    """Under a trace root of mode 1777 (a site's, or TMPDIR for the default directory), the
    place of the victim's directory holds what `kind` says. The recorder records only into a
    directory of the victim's that no one else can write, below directories no one else can
    change (own_0700, and nothing: it creates it, mode 0700); otherwise it is off, the program's
    output unchanged, and nothing of the victim's appears there."""
    victim, attacker = users
    trace_root = shared / "traces"
    trace_root.mkdir()
    os.chmod(trace_root, 0o1777)
    name = victim.pw_name if configured == "IOASSESS_TRACE_DIR" else f"ioassess-{victim.pw_uid}"
    place = trace_root / name
    if kind == "own_0700":
        user_dir(place, victim, 0o700)
    else:
        plant(kind, place, victim, attacker, shared)
    # the Lmod module's layout: ROOT/user/job; the planted directory is one level up
    trace_dir = place / "4242" if kind == "above_attacker_0777" else place
    env = {"IOASSESS_TRACE_DIR": str(trace_dir)} if configured == "IOASSESS_TRACE_DIR" else {"TMPDIR": str(trace_root)}
    work = user_dir(shared / "work", victim, 0o700)
    cmd = [tool("dd"), "if=/dev/zero", "of=out", "bs=64k", "count=16"]
    plain = as_user(victim, cmd, env, work)
    rec = as_user(victim, cmd, {**env, "LD_PRELOAD": str(shared / "libioassess.so")}, work)
    assert_same_run(plain, rec, normalise=dd_without_rate)
    if kind in ("own_0700", "nothing"):
        traces = trace_files(place)
        assert traces and all(os.stat(t).st_uid == victim.pw_uid for t in traces), describe(rec)
        assert stat.S_IMODE(place.stat().st_mode) == 0o700
        return
    if kind == "symlink":
        assert not trace_files(shared / "elsewhere")
    elif place.is_dir():
        assert list(place.iterdir()) == [], f"the victim's recorder wrote into {place}: {list(place.iterdir())}"
    if kind == "file":
        assert place.read_bytes() == b"not a directory\n"


SWAP_SCRIPT = textwrap.dedent("""
    import os, sys
    fd = os.open(sys.argv[1], os.O_RDONLY)
    for i in range(10):
        os.pread(fd, 1, i)
    print("ready", flush=True)
    sys.stdin.readline()
    for i in range(20000):
        os.pread(fd, 1, i % 4096)
    os.pread(os.open(sys.argv[2], os.O_RDONLY), 1, 0)
    print("done", flush=True)
""")


def test_a_trace_replaced_by_another_file_is_not_written(tmp_path, recorder_lib):
    """While the program waits, its trace is renamed and another file put in its place; the
    program then does enough I/O to need new extents. The recorder reopens the trace by path
    only to find another file: it writes nothing into it and stops recording (the header says
    so, the ops after count as lost); the program's output is unchanged."""
    data, later = tmp_path / "data", tmp_path / "opened-after-the-swap"
    data.write_bytes(bytes(4096))
    later.write_bytes(b"x")
    traces, moved = tmp_path / "traces", tmp_path / "moved"
    moved.mkdir()
    plain = run([sys.executable, "-c", SWAP_SCRIPT, data, later], input=b"go\n")
    env = clean_env({"LD_PRELOAD": recorder_lib, "IOASSESS_TRACE_DIR": str(traces)})
    traces.mkdir(mode=0o700)
    program = subprocess.Popen([sys.executable, "-c", SWAP_SCRIPT, data, later], env=env, stdin=subprocess.PIPE,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        first = program.stdout.readline()
        (trace,) = trace_files(traces)
        os.rename(trace, moved / trace.name)
        planted = VICTIM_PATTERN * 64
        trace.write_bytes(planted)
        os.chmod(trace, 0o600)
        out, err = program.communicate(b"go\n", timeout=120)
    finally:
        program.kill()
        program.wait()
    assert (program.returncode, first + out, err) == (plain.returncode, plain.stdout, plain.stderr)
    assert trace.read_bytes() == planted, "the recorder wrote into the file put in its trace's place"
    (process,) = load(moved).processes
    assert process.space_failed and process.ops_lost > 0


def test_a_set_user_id_program_does_not_record(shared, users):
    """A set-user-ID root program run by the victim loads the recorder (dlopen: the loader
    ignores LD_PRELOAD paths for such programs, but /etc/ld.so.preload or a program's own
    dlopen do not): it would create directories and traces as root where the victim says. It
    records nothing and creates nothing; the same program without the set-user-ID bit records."""
    victim, _ = users
    own = user_dir(shared / "own-traces", victim, 0o700)
    work = user_dir(shared / "work", victim, 0o700)
    loadlib = shared / "loadlib"
    shutil.copy(prog("loadlib"), loadlib)
    cmd = [loadlib, shared / "libioassess.so", work / "out"]
    for trace_dir, recorded in ((own, True), (shared / "root-owned" / "new", False)):
        os.chmod(loadlib, 0o755)
        (shared / "root-owned").mkdir(exist_ok=True)
        ordinary = as_user(victim, cmd, {"IOASSESS_TRACE_DIR": str(trace_dir)}, work)
        assert ordinary.stdout == b"loaded\nwritten\n", describe(ordinary)
        assert bool(trace_files(trace_dir)) == recorded, list(shared.rglob("*"))
        for trace in trace_files(own):
            trace.unlink()
        os.chmod(loadlib, 0o4755)
        setuid = as_user(victim, cmd, {"IOASSESS_TRACE_DIR": str(trace_dir)}, work)
        assert setuid.stdout == b"loaded\nwritten\n", describe(setuid)
        assert not trace_files(own) and not (shared / "root-owned" / "new").exists(), list(shared.rglob("*"))


def test_no_helper_process_changes_nothing(shared, users):
    """With RLIMIT_NPROC at 1 the recorder cannot start its helper process: dd, exec'ed by
    prlimit under the recorder, runs as without it and has no trace (prlimit, started before
    the limit, has one)."""
    victim, _ = users
    own = user_dir(shared / "own-traces", victim, 0o700)
    work = user_dir(shared / "work", victim, 0o700)
    cmd = [tool("prlimit"), "--nproc=1", tool("dd"), "if=/dev/zero", "of=out", "bs=64k", "count=16"]
    plain = as_user(victim, cmd, {}, work)
    rec = as_user(victim, cmd, {"IOASSESS_TRACE_DIR": str(own), "LD_PRELOAD": str(shared / "libioassess.so")}, work)
    assert_same_run(plain, rec, normalise=dd_without_rate)
    assert [os.path.basename(p.exe) for p in load(own).processes] == ["prlimit"]
