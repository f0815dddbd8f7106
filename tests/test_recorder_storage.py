"""Nothing that happens to the trace's storage breaks the job (docs/architecture.md, "Trace
storage"; docs/security.md): a copy-on-write file system that fills while the program runs, a
live trace truncated by its owner, and the program's own SIGBUS beside the recorder's.

Each runs a real program with and without the recorder: the same output and exit status, and
the trace and the report say what recording lost. Tests wait on states (lines on a pipe, the
end of a process), never on time.
"""
import json
import os
import pathlib
import resource
import subprocess

import pytest

from ioassess.inputs.trace import read_trace_dir
from recorder_helpers import (RUN_TIMEOUT_S, assert_same_run, clean_env, describe, load, prog, run, select,
                              trace_files)

READS = 100_000     # fillup's preads after the file system is full: a trace of 6 MB
BTRFS_BYTES = 256 << 20


def no_core():
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def report_notes(ioassess, trace_dir, tmp_path):
    """The job's notes in the assessment `ioassess report` makes of trace_dir."""
    json_path = tmp_path / "assessment.json"
    result = ioassess("report", trace_dir, "-o", tmp_path / "report.html", "--json", json_path)
    assert result.returncode == 0, result.stderr
    return json.loads(json_path.read_text())["job"]["notes"]


def on_btrfs(tmp_path, name, cmd, preload=()):
    """The argument list that runs cmd with its working directory on a btrfs file system made on
    a loop device and mounted (in a mount namespace of its own) for the run, unmounted after
    (exit status 99 if it cannot be), and the mount point; cmd's traces, if preloaded, go to a
    directory of that file system, copied to tmp_path/name after the run with their file
    attributes as lsattr lists them in tmp_path/name/lsattr."""
    image, mount, saved = tmp_path / f"{name}.img", tmp_path / f"{name}.mnt", tmp_path / name
    mount.mkdir()
    saved.mkdir()
    with open(image, "wb") as f:
        f.truncate(BTRFS_BYTES)
    libraries = ":".join(map(str, preload))
    preloaded = f'env LD_PRELOAD="{libraries}" IOASSESS_TRACE_DIR="{mount}/traces" ' if preload else ""
    script = (f'mkfs.btrfs -q "{image}" >/dev/null && mount -o loop "{image}" "{mount}" || exit 99; '
              f'mkdir -m 0700 "{mount}/traces"; cd "{mount}"; {preloaded}"$@"; rc=$?; cd /; '
              f'lsattr "{mount}"/traces/*.iot > "{saved}/lsattr" 2>&1; cp -a "{mount}/traces/." "{saved}/"; '
              f'umount "{mount}"; exit $rc')
    return ["unshare", "-m", "/bin/sh", "-c", script, "sh", *map(str, cmd)], mount


def need_btrfs():
    if not kernel_mounts_btrfs():
        pytest.skip("this kernel cannot mount btrfs")


def kernel_mounts_btrfs():
    with open("/proc/filesystems") as f:
        if any(line.split()[-1] == "btrfs" for line in f):
            return True
    return subprocess.run(["modprobe", "btrfs"], capture_output=True).returncode == 0


@pytest.mark.root
def test_a_copy_on_write_file_system_that_fills_while_the_program_runs_changes_nothing(tmp_path, recorder_lib,
                                                                                       ioassess):
    """The trace directory is on btrfs, which the program fills (tests/progs/fillup.c: writes until
    ENOSPC, then 100,000 preads). A store into a mapping of a copy-on-write file needs new blocks
    whatever was written or reserved before, so there the recorder keeps the trace in memory and
    its helper writes it (its blocks reserved, the file NOCOW): no SIGBUS (before: exit 135 in 4
    of 4 runs). Same output and exit status as without the recorder; the trace could not grow,
    says so, and counts what it lost: kept and lost preads make all of them; the report says so."""
    need_btrfs()
    cmd = [prog("fillup"), ".", READS]
    plain = run(on_btrfs(tmp_path, "plain", cmd)[0])
    recorded = run(on_btrfs(tmp_path, "recorded", cmd, preload=[recorder_lib])[0])
    assert plain.returncode != 99 and recorded.returncode != 99, f"cannot make or mount btrfs: {describe(plain)}"
    assert plain.returncode == 0 and plain.stdout == f"full\nread {READS} of {READS}\n".encode(), describe(plain)
    assert_same_run(plain, recorded)
    attributes, name = (tmp_path / "recorded" / "lsattr").read_text().split()
    assert "C" in attributes and name.endswith(".iot"), "the trace is not NOCOW: its reserved blocks are not kept"
    ts = load(tmp_path / "recorded")
    (process,) = ts.processes
    assert process.space_failed and not process.stopped and process.end_reason == "exit"
    kept = int(select(ts, op="pread").sum())
    assert process.ops_lost > 0 and kept + process.ops_lost >= READS, (kept, process.ops_lost)
    notes = report_notes(ioassess, tmp_path / "recorded", tmp_path)
    assert any("could not grow" in note and f"{process.ops_lost} ops were counted nowhere" in note for note in notes)


def start_sigbus(action, tmp_path, recorder_lib, where):
    """tests/progs/sigbus.c under the recorder, its standard input and output pipes, its working
    directory and traces on tmp_path's file system or on btrfs; and where the test finds its
    traces while it runs, and after."""
    if where == "btrfs":
        cmd, mount = on_btrfs(tmp_path, "traces", [prog("sigbus"), action, "data"], preload=[recorder_lib])
        env, live = clean_env(), pathlib.Path(f"/proc/self/root{mount}/traces")   # made absolute below
    else:
        cmd, trace_dir = [prog("sigbus"), action, tmp_path / "data"], tmp_path / "traces"
        trace_dir.mkdir(mode=0o700)
        env, live = clean_env({"LD_PRELOAD": str(recorder_lib), "IOASSESS_TRACE_DIR": str(trace_dir)}), trace_dir
    proc = subprocess.Popen([str(arg) for arg in cmd], stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env,
                            preexec_fn=no_core)
    if where == "btrfs":   # the mount is in the program's mount namespace: seen through its root
        live = pathlib.Path(f"/proc/{proc.pid}/root{mount}/traces")
    return proc, live, tmp_path / "traces"


@pytest.mark.parametrize("where", ["mapped", pytest.param("btrfs", marks=pytest.mark.root)])
@pytest.mark.parametrize("size", [0, 4096])
@pytest.mark.parametrize("action", ["sigaction", "default"])
def test_a_trace_truncated_while_the_program_runs_changes_nothing(action, size, where, tmp_path, recorder_lib,
                                                                  ioassess):
    """tests/progs/sigbus.c writes 1000 records, says "ready" and waits; its trace is truncated (to
    nothing, or to its header) by its owner; it writes 1000 more and makes SIGBUS of its own
    (one sent, one from its own truncated mapping). Every store into the trace's pages past the
    end of the file faulted with SIGBUS (before: the program's handler got it, then SIGSEGV);
    now the recorder handles it, stops recording and counts the ops after that; the program's
    own SIGBUS reach its handler or end it as without the recorder (same output and exit
    status). The trace is a valid trace again at exit: it says recording stopped and how many
    ops were lost, and so does the report. A program that its own SIGBUS ends wrote its last
    counts nowhere: its trace says at least that recording stopped. On btrfs (a buffered trace,
    written by the helper) the helper finds the file shorter than it made it at the program's
    exit (the program with the default action: at its end, its counts in memory are lost)."""
    if where == "btrfs":
        need_btrfs()
    plain_work = tmp_path / "plain"
    plain_work.mkdir()
    plain = run([prog("sigbus"), action, plain_work / "data"], input=b"go\n", preexec_fn=no_core)
    proc, live, saved = start_sigbus(action, tmp_path, recorder_lib, where)
    head = [proc.stdout.readline(), proc.stdout.readline()]
    assert head[-1] == b"ready\n", head
    (trace,) = trace_files(live)
    os.truncate(trace, size)
    rest, _ = proc.communicate(b"go\n", timeout=RUN_TIMEOUT_S)
    status = plain.returncode if plain.returncode >= 0 or where != "btrfs" else 128 - plain.returncode  # sh's
    assert b"".join(head) + rest == plain.stdout and proc.returncode == status, (rest, proc.returncode)
    assert plain.returncode == (0 if action == "sigaction" else -7)
    if where == "btrfs" and action == "default":
        return                               # killed before the helper wrote anything again
    ts = read_trace_dir(str(saved))
    assert not ts.errors, ts.errors
    (process,) = ts.processes
    assert process.stopped and process.ops_lost >= (1000 if action == "sigaction" else 1), process
    assert process.end_reason == ("exit" if action == "sigaction" else "running/killed")
    notes = report_notes(ioassess, saved, tmp_path)
    assert any(note.startswith("recording stopped in 1 of 1 processes") for note in notes), notes


@pytest.mark.parametrize("action", ["sigaction", "signal", "sysv", "default", "ignore"])
def test_the_programs_own_sigbus_is_handled_as_without_the_recorder(action, tmp_path, recorder_lib):
    """tests/progs/sigbus.c with each way of setting SIGBUS (a handler with sigaction, signal or
    sysv_signal, the default, ignored): it reads its own action back, and its own SIGBUS (sent
    with kill, and from its own truncated mapping) reach its handler with their siginfo, reset
    it (sysv_signal), are ignored when sent (ignored) or end it (default; a fault ignored), with
    the same output and exit status as without the recorder, whose handler is the kernel's."""
    plain_work, rec_work = tmp_path / "plain", tmp_path / "rec"
    plain_work.mkdir()
    rec_work.mkdir()
    plain = run([prog("sigbus"), action, plain_work / "data"], input=b"go\n", preexec_fn=no_core)
    recorded = run([prog("sigbus"), action, rec_work / "data"], input=b"go\n", preexec_fn=no_core,
                   preload=[recorder_lib], trace_dir=tmp_path / "traces")
    assert_same_run(plain, recorded)
    expected = {"sigaction": 0, "signal": 0, "sysv": -7, "default": -7, "ignore": -7}[action]
    assert plain.returncode == expected, describe(plain)
    assert pathlib.Path(rec_work / "data").read_bytes() == pathlib.Path(plain_work / "data").read_bytes()
    (process,) = load(tmp_path / "traces").processes
    assert not process.stopped and process.ops_lost == 0
