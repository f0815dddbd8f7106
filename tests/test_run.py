"""`ioassess run` ends as the job ended: real commands, real signals, the installed CLI."""
import io
import json
import os
import resource
import signal
import struct
import subprocess
import sys

import pytest

import ioassess.report as report_package
from ioassess import read_trace_dir
from ioassess.units import count_text
from recorder_helpers import prog, without_meta

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
