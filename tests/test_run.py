"""`ioassess run` ends as the job ended: real commands, real signals, the installed CLI."""
import datetime
import io
import json
import os
import re
import resource
import signal
import struct
import subprocess
import sys

import pytest

import ioassess.report as report_package
from ioassess import read_trace_dir
from ioassess.units import count_text
from probe_stores import slow_schema_store
from recorder_helpers import ATTACKER_USER, WAIT_S, clean_env, prog, system_user, tool, wait_until, without_meta

# libmpich pulls in UCX, which installs a C handler for SIGHUP in every process that loads it.
LIBMPICH = "/usr/lib/x86_64-linux-gnu/libmpich.so.12"
GROUP_KILL_RUNS = 10


def summary_line(trace_dir, traces=1):
    return (f"ioassess: traces of {count_text(traces, 'process')} in {trace_dir}; "
            f"wrote {trace_dir / 'report.html'} and {trace_dir / 'assessment.json'}")


def test_run_puts_back_a_signal_handler_that_python_cannot_name(ioassess, tmp_path):
    assert os.path.exists(LIBMPICH), "libmpich is missing: `make deps` installs it"
    result = ioassess("run", "--trace-dir", tmp_path / "t", "--", "true", env={"LD_PRELOAD": LIBMPICH})
    assert (result.returncode, result.stderr.splitlines()) == (0, [summary_line(tmp_path / "t")])


UCX_HANDLER_CHECK = """
import ctypes, signal, sys
from ioassess.cli import _run_passing_on_signals
class SigAction(ctypes.Structure):   # glibc's struct sigaction on x86-64
    _fields_ = [("handler", ctypes.c_void_p), ("mask", ctypes.c_uint64 * 16), ("flags", ctypes.c_int),
                ("restorer", ctypes.c_void_p)]
def sighup_action():
    action = SigAction()
    assert ctypes.CDLL(None).sigaction(signal.SIGHUP, None, ctypes.byref(action)) == 0
    return action.handler, action.mask[0], action.flags, action.restorer
before = sighup_action()
assert signal.getsignal(signal.SIGHUP) is None and before[0]   # a C library's handler, which Python cannot name
_run_passing_on_signals(["true"], {})
after = sighup_action()
sys.exit(0 if after == before else f"SIGHUP's action was {before}, is {after}")
"""


def test_run_puts_back_the_very_handler_of_the_c_library(tmp_path):
    result = subprocess.run([sys.executable, "-c", UCX_HANDLER_CHECK], env={**os.environ, "LD_PRELOAD": LIBMPICH},
                            cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr


@pytest.mark.parametrize("signum", [signal.SIGSEGV, signal.SIGTERM, signal.SIGINT])
def test_run_ends_by_the_signal_that_ended_the_command_after_the_report(ioassess, tmp_path, signum):
    result = ioassess("run", "--trace-dir", tmp_path / "t", "--", "sh", "-c", f"kill -{signum.name[3:]} $$")
    assert (result.returncode, result.stderr.splitlines()) == (-signum, [summary_line(tmp_path / "t")])
    assert (tmp_path / "t" / "report.html").exists()


def core_pid_and_name(path):
    """(pr_pid, pr_fname) of an x86-64 ELF core file's NT_PRPSINFO note."""
    data = path.read_bytes()
    phoff, = struct.unpack_from("<Q", data, 0x20)
    phentsize, phnum = struct.unpack_from("<HH", data, 0x36)
    for index in range(phnum):
        kind, _flags, offset, _vaddr, _paddr, size = struct.unpack_from("<IIQQQQ", data, phoff + index * phentsize)
        position = offset
        while kind == 4 and position < offset + size:   # PT_NOTE
            name_size, desc_size, note_type = struct.unpack_from("<III", data, position)
            desc = position + 12 + (name_size + 3) // 4 * 4
            if note_type == 3:   # NT_PRPSINFO
                pid, = struct.unpack_from("<i", data, desc + 24)
                return pid, data[desc + 40:desc + 56].split(b"\0")[0].decode()
            position = desc + (desc_size + 3) // 4 * 4
    raise AssertionError(f"{path}: no NT_PRPSINFO note")


def test_run_ending_by_sigsegv_leaves_the_commands_core_dump(start_ioassess, tmp_path):
    with open("/proc/sys/kernel/core_pattern") as pattern:
        if pattern.read().strip() != "core":
            pytest.skip("kernel.core_pattern is not `core`: core dumps do not go to the working directory")
    hard_limit = resource.getrlimit(resource.RLIMIT_CORE)[1]
    if hard_limit == 0:
        pytest.skip("core dumps are off (hard RLIMIT_CORE 0)")
    run = start_ioassess("run", "--trace-dir", tmp_path / "t", "--", "sh", "-c", "kill -SEGV $$", cwd=tmp_path,
                         preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_CORE, (hard_limit, hard_limit)))
    run.communicate(timeout=300)
    assert run.returncode == -signal.SIGSEGV
    cores = [path for path in tmp_path.iterdir() if path.name.startswith("core")]
    assert len(cores) == 1
    pid, name = core_pid_and_name(cores[0])
    assert name == "sh" and pid != run.pid


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP, signal.SIGINT])
def test_a_signal_to_the_process_group_reaches_the_command_once(start_ioassess, tmp_path, signum):
    """scancel, a time limit, `timeout` or a terminal signal every process of the job: the
    command gets the signal from there, and ioassess must not pass on a second copy."""
    counts, endings = [], []
    for run_number in range(GROUP_KILL_RUNS):
        trace_dir = tmp_path / str(run_number)
        run = start_ioassess("run", "--trace-dir", trace_dir, "--", prog("sigcount"), start_new_session=True)
        assert run.stdout.readline() == "ready\n"
        os.killpg(run.pid, signum)
        assert run.stdout.readline() == f"{signum.name}\n"
        run.stdin.close()
        counts.append(run.stdout.read())
        endings.append((run.wait(timeout=300), run.stderr.read().splitlines() == [summary_line(trace_dir)]))
    assert counts == ["count 1\n"] * GROUP_KILL_RUNS
    assert endings == [(0, True)] * GROUP_KILL_RUNS


def test_a_signal_ignored_by_ioassess_stays_ignored_for_the_command(ioassess, tmp_path):
    """`nohup ioassess run -- CMD`: the command inherits the ignored SIGHUP, as without ioassess."""
    result = ioassess("run", "--trace-dir", tmp_path / "t", "--", "sh", "-c", "kill -HUP $$; echo survived",
                      preexec_fn=lambda: signal.signal(signal.SIGHUP, signal.SIG_IGN))
    assert (result.returncode, result.stdout) == (0, "survived\n")


@pytest.mark.parametrize("with_op", [False, True])
def test_a_process_killed_right_after_its_start_gets_a_report(ioassess, tmp_path, with_op):
    """killself sends itself SIGKILL within microseconds of its start: its trace has the clock
    reading of its start only (and of its first op, with one)."""
    data = tmp_path / "data"
    data.write_bytes(b"x")
    command = [prog("killself"), data] if with_op else [prog("killself")]
    result = ioassess("run", "--trace-dir", tmp_path / "t", "--", *command)
    assert (result.returncode, result.stderr.splitlines()) == (-signal.SIGKILL, [summary_line(tmp_path / "t")])
    traces = read_trace_dir(tmp_path / "t")
    (process,) = traces.processes
    assert process.end_ns is None and not traces.errors
    if with_op:   # its pread (its open is a metadata op)
        ops = without_meta(traces).ops
        assert ops["op"].size == 1 and ops["start_ns"][0] >= process.start_ns
        assert 0 < ops["duration_ns"][0] < 10**9
    else:
        assert traces.notes == [f"{process.path}: its clock could not be fitted (a single clock reading, at its "
                                "start): it has no op to time"]
    with open(tmp_path / "t" / "assessment.json") as f:
        job_notes = json.load(f)["job"]["notes"]
    assert all(note in job_notes for note in traces.notes), (traces.notes, job_notes)


class TerminalStream(io.StringIO):
    def isatty(self):
        return True


def test_a_report_shows_its_progress_bar_on_a_terminal_only(run_recorded, tmp_path, monkeypatch):
    """A batch job's output file gets no progress bar; a terminal does (here for any report,
    however quick it is)."""
    data = tmp_path / "data"
    data.write_bytes(b"x" * 4096)
    assert run_recorded(["cat", data], tmp_path / "t").returncode == 0
    monkeypatch.setattr(report_package, "QUIET_FOR_S", 0.0)
    log_file, terminal = io.StringIO(), TerminalStream()
    for stream in (log_file, terminal):
        report_package.make_report([tmp_path / "t"], "local-linux", tmp_path / "report.html", None, stream)
    assert log_file.getvalue() == "" and "] 100% written" in terminal.getvalue()


def store_reader(run, db):
    """The pid of `ioassess run`'s report process once it has the probe store db open."""
    def readers():
        try:
            with open(f"/proc/{run.pid}/task/{run.pid}/children") as children:
                pids = children.read().split()
            return [pid for pid in pids if str(db) in
                    [os.readlink(f"/proc/{pid}/fd/{fd}") for fd in os.listdir(f"/proc/{pid}/fd")]]
        except OSError:   # a process that ended meanwhile
            return []
    wait_until(readers, "a report process reading the store", run)
    return int(readers()[0])


@pytest.mark.parametrize("how", ["report killed", "ioassess terminated"])
def test_nothing_the_report_does_changes_the_commands_exit_status(start_ioassess, tmp_path, how):
    """The report is made in a process of its own: the kernel's out-of-memory killer ending it
    (SIGKILL), or a SIGTERM to ioassess while it runs, ends it without a report, and ioassess
    ends as the command did. A store whose schema takes a minute to read keeps the report busy."""
    db = slow_schema_store(tmp_path / "probe.sqlite")
    run = start_ioassess("run", "--trace-dir", tmp_path / "t", "--", "sh", "-c", "exit 3",
                         env={"IOASSESS_PROBE_DB": str(db)})
    report = store_reader(run, db)
    if how == "report killed":
        os.kill(report, signal.SIGKILL)
    else:
        run.send_signal(signal.SIGTERM)
    _, stderr = run.communicate(timeout=WAIT_S)
    ended = "the report's process was killed by SIGKILL" if how == "report killed" else "interrupted"
    assert (run.returncode, stderr) == (3, f"ioassess: traces of 1 process in {tmp_path / 't'}; no report: {ended}\n")
    assert not (tmp_path / "t" / "report.html").exists()


def test_squatted_default_trace_directories_leave_the_command_running(job_user, installation_reachable,
                                                                     searchable_tmp):
    """Another user makes the default trace directories of the coming minutes in a shared
    (1777) working directory: the job's command runs all the same, unrecorded, with one line
    saying why, and ioassess ends with its status. The default name ends in ioassess's pid: in
    a pid namespace of its own, ioassess is pid 1."""
    attacker = system_user(ATTACKER_USER)
    shared = searchable_tmp / "shared"
    shared.mkdir()
    os.chmod(shared, 0o1777)
    now = datetime.datetime.now(datetime.timezone.utc)
    names = [f"ioassess-{now + datetime.timedelta(seconds=second):%Y%m%d-%H%M%S}-1" for second in range(-1, 120)]
    squat = "import os, sys\nfor name in sys.argv[1:]:\n    os.mkdir(name)\n    os.chmod(name, 0o777)"
    subprocess.run([sys.executable, "-c", squat, *names], cwd=shared, user=attacker.pw_uid, group=attacker.pw_gid,
                   extra_groups=[], check=True, timeout=WAIT_S)
    run = subprocess.run([tool("unshare"), "--pid", "--fork", tool("setpriv"), f"--reuid={job_user.pw_uid}",
                          f"--regid={job_user.pw_gid}", "--clear-groups", sys.executable, "-m", "ioassess", "run",
                          "--", "sh", "-c", "echo ran; exit 3"], cwd=shared, capture_output=True, text=True,
                         timeout=WAIT_S, env=clean_env({"PATH": "/usr/bin:/bin"}))
    assert (run.returncode, run.stdout) == (3, "ran\n"), run.stderr
    (line,) = run.stderr.splitlines()
    squatted = re.fullmatch(rf"ioassess: \./(ioassess-\d{{8}}-\d{{6}}-1): the recorder records only into a directory "
                            rf"of yours that no one else can write \(this one: uid {attacker.pw_uid}, mode 0777\): "
                            r"choose another --trace-dir; running the command unrecorded", line)
    assert squatted and squatted[1] in names, line
    assert not list(shared.rglob("*.iot"))
