"""The recorder at the edges of what a process may do: closing every descriptor, a descriptor
limit of 16, no address space left, static and setuid programs, pids used again. Each program
behaves exactly as without the recorder; where the recorder can record, the trace is right,
and where it cannot, it stays out of the way.
"""
import os
import resource
import shutil
import stat
import subprocess

import pytest

from recorder_helpers import assert_same_run, describe, load, prog, run, tool, trace_files

pytestmark = pytest.mark.root

EDGES_OPS = 128   # `edges io` and each half of `closeall`: 64 pwrites and 64 preads of 4 KiB


def plain_and_recorded(tmp_path, recorder_lib, cmd, preexec_fn=None):
    """Run cmd ("{dir}" in an argument becomes a fresh work directory) plainly and under the
    recorder; returns (plain, recorded, trace directory)."""
    results = []
    for name, preload in (("plain", []), ("recorded", [recorder_lib])):
        work = tmp_path / name
        work.mkdir()
        results.append(run([str(c).replace("{dir}", str(work)) for c in cmd], preload=preload,
                           trace_dir=tmp_path / "traces" if preload else None, preexec_fn=preexec_fn))
    return results[0], results[1], tmp_path / "traces"


def ops_of_file(traceset, name):
    file_ids = [i for i, f in traceset.files.items() if f.name == name]
    return int(sum((traceset.ops["file_id"] == i).sum() for i in file_ids))


def test_closing_every_descriptor_changes_nothing_and_is_still_recorded(tmp_path, recorder_lib):
    """A program closes every descriptor it may have (as daemons do): the recorder holds none
    open, so the program closes exactly as many as without it, and its later I/O is recorded."""
    plain, recorded, traces = plain_and_recorded(tmp_path, recorder_lib, [prog("edges"), "closeall", "{dir}"])
    assert plain.returncode == 0, describe(plain)
    assert_same_run(plain, recorded)
    assert b"closed 0\n" in plain.stdout
    ts = load(traces)
    assert ops_of_file(ts, str(tmp_path / "recorded" / "after")) == EDGES_OPS


def test_descriptor_limit_of_16(tmp_path, recorder_lib):
    """Under RLIMIT_NOFILE 16 the program opens exactly as many files as without the recorder
    before EMFILE, and its I/O afterwards is recorded."""
    def limit_descriptors():
        resource.setrlimit(resource.RLIMIT_NOFILE, (16, 16))
    plain, recorded, traces = plain_and_recorded(tmp_path, recorder_lib, [prog("edges"), "openmax", "{dir}"],
                                                 preexec_fn=limit_descriptors)
    assert plain.returncode == 0 and b"opened 13 then EMFILE\n" in plain.stdout, describe(plain)
    assert_same_run(plain, recorded)
    assert ops_of_file(load(traces), str(tmp_path / "recorded" / "io")) == EDGES_OPS


def test_no_address_space_left(tmp_path, recorder_lib):
    """The program lowers RLIMIT_AS to what it already uses: once the recorder's first chunk
    is full it cannot map another, so it counts the ops it lost, and the program runs exactly
    as without it."""
    plain, recorded, traces = plain_and_recorded(tmp_path, recorder_lib, [prog("edges"), "tightas", "{dir}"])
    assert plain.returncode == 0, describe(plain)
    assert_same_run(plain, recorded)
    (process,) = load(traces, meta=True).processes
    # each round opens and closes its file too
    assert process.ops_lost + process.ops_kept == 16 * (EDGES_OPS + 2) and process.ops_lost > 0


def test_static_program_is_untouched(tmp_path, recorder_lib):
    """LD_PRELOAD cannot reach a static program: it runs as without the recorder, and no trace
    is left."""
    plain, recorded, traces = plain_and_recorded(tmp_path, recorder_lib, [prog("edges-static"), "io", "{dir}"])
    assert plain.returncode == 0, describe(plain)
    assert_same_run(plain, recorded)
    assert trace_files(traces) == []


def test_setuid_program_with_the_recorder_in_ld_so_preload(searchable_tmp, recorder_lib, job_user):
    """A site that puts the recorder in /etc/ld.so.preload (here a private /etc in a mount
    namespace) also loads it into setuid programs, where the environment is the caller's. A
    setuid-root program run by an unprivileged user who names a trace directory of their choice
    must create nothing there (a root-owned file at a path the user picks is a privilege
    escalation); the same user's own program is recorded as usual."""
    if subprocess.run([tool("unshare"), "-m", "true"], capture_output=True).returncode != 0:
        pytest.fail("this test needs `unshare -m` (root with CAP_SYS_ADMIN), as on the project's machines")
    tmp_path = searchable_tmp
    shared = tmp_path / "shared"      # the recorder library and the programs, readable by all
    shared.mkdir(mode=0o755)
    library = shared / "libioassess.so"
    shutil.copyfile(recorder_lib, library)
    own_program = shared / "edges"
    shutil.copyfile(prog("edges"), own_program)
    setuid_program = shared / "edges-setuid"
    shutil.copyfile(prog("edges"), setuid_program)
    os.chmod(library, 0o755)
    os.chmod(own_program, 0o755)
    os.chmod(setuid_program, 0o4755)
    etc = tmp_path / "etc"
    shutil.copytree("/etc", etc, symlinks=True)
    (etc / "ld.so.preload").write_text(f"{library}\n")
    playground, setuid_work, own_work = tmp_path / "playground", tmp_path / "setuid-work", tmp_path / "own-work"
    for path in (playground, setuid_work, own_work):   # like /tmp: anyone may create in them
        path.mkdir()
        os.chmod(path, 0o1777)
    chosen = playground / "chosen-by-the-user"
    own = playground / "own-traces"
    as_user = [tool("setpriv"), f"--reuid={job_user.pw_uid}", f"--regid={job_user.pw_gid}",
               "--clear-groups", "env"]
    script = (f'mount --bind "{etc}" /etc && '
              f'{" ".join(as_user)} IOASSESS_TRACE_DIR="{chosen}" "{setuid_program}" io "{setuid_work}" && '
              f'{" ".join(as_user)} IOASSESS_TRACE_DIR="{own}" "{own_program}" io "{own_work}"')
    result = subprocess.run([tool("unshare"), "-m", "/bin/sh", "-c", script], capture_output=True, timeout=120)
    assert result.returncode == 0, describe(result)
    assert result.stdout == b"io sum 28360704\nio sum 28360704\n" and result.stderr == b"", describe(result)
    assert not os.path.lexists(chosen), sorted(os.listdir(playground))
    (trace,) = trace_files(own)
    assert os.stat(trace).st_uid == job_user.pw_uid
    assert stat.S_IMODE(os.stat(own).st_mode) == 0o700


def test_a_pid_used_again_gets_a_new_trace_name(tmp_path, recorder_lib):
    """Two runs in fresh pid namespaces both have pid 1: the second trace gets the next name and
    both keep their own ops."""
    if subprocess.run([tool("unshare"), "--pid", "--fork", "true"], capture_output=True).returncode != 0:
        pytest.fail("this test needs `unshare --pid` (root with CAP_SYS_ADMIN), as on the project's machines")
    for name in ("first", "second"):
        (tmp_path / name).mkdir()
        result = run([tool("unshare"), "--pid", "--fork", prog("edges"), "io", tmp_path / name],
                     preload=[recorder_lib], trace_dir=tmp_path / "traces")
        assert result.returncode == 0, describe(result)
    ts = load(tmp_path / "traces")
    # in each namespace pid 1 is unshare's child, which then runs edges: two images, two traces
    names = sorted(os.path.basename(p.path) for p in ts.processes if p.pid == 1)
    assert [name.rsplit("_", 1)[1] for name in names] == ["0.iot", "1.iot", "2.iot", "3.iot"], names
    for name in ("first", "second"):
        assert ops_of_file(ts, str(tmp_path / name / "io")) == EDGES_OPS
    # the /proc mounted outside the namespace names the host's pid 1 as 1: the arguments are the program's own
    commands = sorted(p.cmdline for p in ts.processes if p.pid == 1 and p.exe == prog("edges"))
    assert commands == [f"{prog('edges')} io {tmp_path / name}" for name in ("first", "second")], commands
