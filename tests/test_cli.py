"""The `ioassess` command line, run as a user runs it (python -m ioassess), on real traces."""
import json
import os
import pathlib
import re
import shutil
import stat
import subprocess
import sys

import numpy as np
import pytest

from ioassess import mpiio_library_path, read_trace_dir, totals
from ioassess.inputs import traceformat as tf
from ioassess.escape import printable
from ioassess.files import file_system_of
from ioassess.units import count_text
from ioassess.models.modelfile import DEFAULT_MODEL, model_path
from recorder_helpers import ATTACKER_USER, clean_env, shipped_darshan_logs, system_user, tool


def stderr_lines(result):
    return result.stderr.splitlines()


def assert_clean_error(result, *expected_lines):
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    assert stderr_lines(result) == [f"ioassess: {line}" for line in expected_lines]


# --- ioassess run ----------------------------------------------------------------------------

def test_run_exits_with_the_commands_status_and_says_where_the_traces_are(ioassess, tmp_path):
    result = ioassess("run", "--trace-dir", tmp_path / "t" / "traces", "--", "sh", "-c", "echo hi; exit 3")
    assert result.returncode == 3 and result.stdout == "hi\n"
    traces = sorted((tmp_path / "t" / "traces").glob("*.iot"))
    trace_dir = tmp_path / "t" / "traces"
    assert stderr_lines(result) == [f"ioassess: traces of {count_text(len(traces), 'process')} in {trace_dir}; "
                                    f"wrote {trace_dir / 'report.html'} and {trace_dir / 'assessment.json'}"]
    assert len(traces) >= 1 and stat.S_IMODE((tmp_path / "t" / "traces").stat().st_mode) == 0o700
    assert read_trace_dir(tmp_path / "t" / "traces").processes[0].exit_status == 3


def test_run_forwards_signals_to_the_command(ioassess, tmp_path):
    script = "trap 'echo got-usr1; exit 7' USR1; kill -USR1 $PPID; sleep 5 >/dev/null 2>&1 & wait"
    result = ioassess("run", "--trace-dir", tmp_path / "t", "--", "sh", "-c", script)
    assert (result.returncode, result.stdout) == (7, "got-usr1\n")


@pytest.mark.mpi
def test_run_puts_the_recorders_around_ld_preload_and_sets_the_trace_dir(ioassess, recorder_lib, tmp_path):
    """The MPI-IO recorder in front of what is preloaded (Darshan), the POSIX recorder behind it."""
    mpiio_lib = mpiio_library_path()
    assert mpiio_lib, "libioassess-mpiio.so was not built: `make deps` installs MPICH's mpicc"
    show = 'echo "$LD_PRELOAD|$IOASSESS_TRACE_DIR"'
    cases = (("/opt/darshan/lib/libdarshan.so", f"{mpiio_lib}:/opt/darshan/lib/libdarshan.so:{recorder_lib}"),
             (f"libm.so.6 {recorder_lib}", f"{mpiio_lib}:libm.so.6:{recorder_lib}"),
             ("", f"{mpiio_lib}:{recorder_lib}"))
    for number, (preload, expected) in enumerate(cases):
        trace_dir = tmp_path / f"rel{number}"
        result = ioassess("run", "--trace-dir", trace_dir.name, "--", "sh", "-c", show, cwd=tmp_path,
                          env={"LD_PRELOAD": preload})
        assert (result.returncode, result.stdout) == (0, f"{expected}|{trace_dir}\n"), result.stderr


def test_run_defaults_to_a_directory_named_after_the_job(ioassess, tmp_path):
    result = ioassess("run", "--", "true", cwd=tmp_path, env={"PBS_JOBID": "77.server/x"})
    assert result.returncode == 0
    (made,) = tmp_path.iterdir()
    assert re.fullmatch(r"ioassess-77\.server-x-\d{8}-\d{6}-\d+", made.name) and list(made.glob("*.iot"))
    assert stderr_lines(result)[0].startswith(f"ioassess: traces of 1 process in ./{made.name}; wrote ")


def test_run_defaults_to_a_dated_directory_outside_a_job(ioassess, tmp_path):
    assert ioassess("run", "--", "true", cwd=tmp_path).returncode == 0
    (made,) = tmp_path.iterdir()
    assert re.fullmatch(r"ioassess-\d{8}-\d{6}-\d+", made.name) and list(made.glob("*.iot"))


def test_run_runs_the_command_unrecorded_beside_earlier_traces(ioassess, tmp_path):
    """Earlier traces are never mixed with new ones, and the command runs all the same."""
    (tmp_path / "t").mkdir()
    (tmp_path / "t" / "old.iot").write_bytes(b"earlier")
    result = ioassess("run", "--trace-dir", tmp_path / "t", "--", "sh", "-c", f"touch {tmp_path / 'ran'}; exit 3")
    assert result.returncode == 3 and (tmp_path / "ran").exists()
    assert stderr_lines(result) == [f"ioassess: {tmp_path / 't'} already holds 1 trace files (*.iot) of an earlier "
                                    "run: choose another --trace-dir; running the command unrecorded"]
    assert os.listdir(tmp_path / "t") == ["old.iot"] and (tmp_path / "t" / "old.iot").read_bytes() == b"earlier"


@pytest.mark.parametrize("mode", [0o775, 0o777])
def test_run_runs_the_command_unrecorded_where_the_recorder_would_not_record(ioassess, tmp_path, mode):
    """A trace directory others can write is one the recorder turns itself off for: ioassess
    says so, and the command runs unrecorded, its exit status ioassess's."""
    (tmp_path / "t").mkdir()
    os.chmod(tmp_path / "t", mode)
    result = ioassess("run", "--trace-dir", tmp_path / "t", "--", "sh", "-c", "echo ran; exit 3")
    assert (result.returncode, result.stdout) == (3, "ran\n")
    assert stderr_lines(result) == [
        f"ioassess: {tmp_path / 't'}: the recorder records only into a directory of yours that no one else can "
        f"write (this one: uid {os.getuid()}, mode {mode:04o}): choose another --trace-dir; running the command "
        "unrecorded"]
    below = tmp_path / "t" / "below"
    result = ioassess("run", "--trace-dir", below, "--", "sh", "-c", "echo ran; exit 4")
    assert (result.returncode, result.stdout) == (4, "ran\n")
    assert stderr_lines(result) == [
        f"ioassess: {below}: the recorder records only below directories that no one but root and you can change, "
        f"and {tmp_path / 't'} is not one (uid {os.getuid()}, mode {mode:04o}): choose another --trace-dir; running "
        "the command unrecorded"]
    assert not list((tmp_path / "t").rglob("*.iot"))


def test_run_a_missing_or_unrunnable_command(ioassess, tmp_path):
    missing = ioassess("run", "--trace-dir", tmp_path / "a", "--", "no-such-command-here")
    assert missing.returncode == 127 and stderr_lines(missing) == ["ioassess: no-such-command-here: command not found"]
    script = tmp_path / "script"
    script.write_text("#!/bin/sh\n")
    unrunnable = ioassess("run", "--trace-dir", tmp_path / "b", "--", script)
    assert unrunnable.returncode == 126 and stderr_lines(unrunnable) == [
        f"ioassess: {script}: cannot run: Permission denied"]


def test_run_without_the_library_or_a_command(ioassess, tmp_path):
    result = ioassess("run", "--trace-dir", tmp_path / "t", "--", "sh", "-c", "exit 5",
                      env={"IOASSESS_LIBRARY": "/nonexistent.so"})
    assert result.returncode == 5 and stderr_lines(result) == [
        "ioassess: the recorder library /nonexistent.so is missing: reinstall ioassess (pip install .); running the "
        "command unrecorded"]
    assert_clean_error(ioassess("run", "--"), "run needs a command: ioassess run [--trace-dir DIR] -- CMD ARGS...")


# --- ioassess show ---------------------------------------------------------------------------

@pytest.fixture
def trace_dir(ioassess, tmp_path):
    """Traces of a small shell job: sh, dd writing 40 x 4 KiB, cat reading it back."""
    data = tmp_path / "data"
    script = f"dd if=/dev/zero of={data} bs=4k count=40 2>/dev/null; cat {data} >/dev/null"
    assert ioassess("run", "--trace-dir", tmp_path / "traces", "--", "sh", "-c", script).returncode == 0
    return tmp_path / "traces"


def show_json(ioassess, *dirs):
    result = ioassess("show", "--json", *dirs)
    return result, json.loads(result.stdout)


SHOW_KEYS = {"process_count", "processes", "hosts", "file_count", "metadata_only_file_count", "top_files", "op_kinds",
             "directions", "layers", "ops_kept", "ops_not_kept", "ops_lost", "stopped_recording", "errors"}
PROCESS_KEYS = {"path", "pid", "ppid", "rank", "job_id", "hostname", "exe", "cmdline", "start_ns", "end_ns",
                "end_reason", "exit_status", "clock_source", "ns_per_tick", "record_cap", "ops_kept", "ops_not_kept",
                "ops_lost", "obfuscated", "space_failed", "stopped", "pagecache", "pagecache_samples",
                "pagecache_ignored"}
AMOUNT_KEYS = {"count", "bytes", "duration_s", "errors"}


def test_show_json_keys_and_numbers(ioassess, trace_dir, tmp_path):
    result, summary = show_json(ioassess, trace_dir)
    assert result.returncode == 0 and result.stderr == ""
    assert set(summary) == SHOW_KEYS and summary["errors"] == []
    n_traces = len(list(trace_dir.glob("*.iot")))
    assert summary["process_count"] == n_traces == len(summary["processes"])
    assert all(set(process) == PROCESS_KEYS for process in summary["processes"])
    assert summary["hosts"] == [{"hostname": os.uname().nodename, "process_count": n_traces}]
    assert summary["file_count"] >= 1
    top = summary["top_files"][0]
    assert set(top) == {"file_id", "name"} | AMOUNT_KEYS and re.fullmatch(r"0x[0-9a-f]{16}", top["file_id"])
    assert (top["name"], top["bytes"]) == (str(tmp_path / "data"), 2 * 40 * 4096) and top["count"] > 40
    kinds = {kind["op"]: kind for kind in summary["op_kinds"]}
    assert all(set(kind) == {"op", "direction"} | AMOUNT_KEYS for kind in kinds.values())
    assert kinds["write"]["count"] >= 40 and kinds["write"]["direction"] == "write"
    assert isinstance(kinds["write"]["duration_s"], float) and kinds["write"]["duration_s"] > 0
    assert sum(d["count"] for d in summary["directions"]) == sum(k["count"] for k in kinds.values())
    assert [(layer["layer"], layer["count"]) for layer in summary["layers"]] == [
        ("posix", sum(k["count"] for k in kinds.values()))]
    assert summary["ops_kept"] + summary["ops_not_kept"] == sum(k["count"] for k in kinds.values())
    traces = read_trace_dir(trace_dir)
    # files with a read, write or sync, and files named by metadata calls alone (the shell's
    # failed lookups of dd and cat along PATH)
    is_meta = np.array([tf.OP_DIRECTION[int(op)] == "meta" for op in traces.ops["op"]], bool)
    named = traces.ops["file_id"] != 0   # 0: the directory of an *at() call was not known
    data_files = set(traces.ops["file_id"][~is_meta & named].tolist())
    assert summary["file_count"] == len(data_files)
    metadata_only = set(traces.ops["file_id"][is_meta & named].tolist()) - data_files
    assert summary["metadata_only_file_count"] == len(metadata_only) > 0
    by_op = totals(traces, by=("op",))
    assert {tf.OP_NAMES[int(op)]: int(count) for op, count in zip(by_op["op"], by_op["count"])} == {
        name: kind["count"] for name, kind in kinds.items()}


def test_show_text(ioassess, trace_dir, tmp_path):
    result = ioassess("show", trace_dir)
    assert result.returncode == 0 and result.stderr == ""
    lines = result.stdout.splitlines()
    n_traces = len(list(trace_dir.glob("*.iot")))
    assert lines[0].startswith(f"{n_traces} processes on 1 host, ")
    assert re.match(r"ops: \d+ kept individually, 0 only in the summary table \(past the record cap\), 0 lost$",
                    lines[1])
    for heading in ("processes", "hosts", "top files by bytes", "op kinds"):
        assert heading in lines
    assert any(line.split()[:1] == [str(2 * 40 * 4096)] and line.endswith(f" {tmp_path / 'data'}") for line in lines)
    # errors: the shell's stats of the directories of PATH where its programs are not
    assert re.search(r"^  total\s+\d+\s+\d+\s+\d+\.\d{6}\s+\d+$", result.stdout, re.M)
    assert re.search(r"^  open\s+meta\s+\d+\s+0\s+\d+\.\d{6}\s+0$", result.stdout, re.M)


def test_show_counts_ops_past_the_record_cap(ioassess, tmp_path):
    data = tmp_path / "data"
    result = ioassess("run", "--trace-dir", tmp_path / "traces", "--", "dd", "if=/dev/zero", f"of={data}", "bs=512",
                      "count=100", env={"IOASSESS_MAX_RECORDS": "10"})
    assert result.returncode == 0
    _, summary = show_json(ioassess, tmp_path / "traces")
    (top,) = [f for f in summary["top_files"] if f["name"] == str(data)]
    kinds = {kind["op"]: kind["count"] for kind in summary["op_kinds"]}
    # its writes, and its open and the closes of its descriptor (dd dups it onto stdout)
    assert (top["count"], top["bytes"], kinds["write"]) == (100 + kinds["open"] + kinds["close"], 100 * 512, 100)
    assert summary["ops_not_kept"] >= 90 and summary["ops_lost"] == 0


def corrupt_magic(path):
    data = bytearray(path.read_bytes())
    data[:8] = b"NOTTRACE"
    path.write_bytes(bytes(data))


def corrupt_first_slot_type(path):
    data = bytearray(path.read_bytes())
    data[tf.HEADER_BYTES] = 0x7F
    path.write_bytes(bytes(data))


def truncate_to(size):
    def damage(path):
        with open(path, "r+b") as f:
            f.truncate(size)
    return damage


REAL_CORRUPTIONS = {
    "truncated to 100 bytes": (truncate_to(100), "truncated: 100 bytes, the header alone needs 4096"),
    "truncated to header+10": (truncate_to(tf.HEADER_BYTES + 10),
                               "truncated: 4106 bytes is not the 4096-byte header plus whole 4096-byte pages"),
    "bad magic": (corrupt_magic, "not an ioassess trace (bad magic)"),
    "random bytes": (lambda p: p.write_bytes(np.random.default_rng(7).bytes(3 * 4096)),
                     "not an ioassess trace (bad magic)"),
    "unknown slot type": (corrupt_first_slot_type, "corrupt: slot 0 has unknown type 127"),
}


@pytest.mark.parametrize("corruption", REAL_CORRUPTIONS)
def test_show_reports_a_bad_trace_and_still_summarises_the_rest(ioassess, trace_dir, corruption):
    damage, problem = REAL_CORRUPTIONS[corruption]
    traces = sorted(trace_dir.glob("*.iot"))
    victim = max(traces, key=lambda p: p.stat().st_size)  # one with slots, so that every damage applies
    damage(victim)
    result, summary = show_json(ioassess, trace_dir)
    assert_clean_error(result, f"{victim}: {problem}")
    assert summary["errors"] == [f"{victim}: {problem}"]
    assert summary["process_count"] == len(traces) - 1
    assert str(victim) not in [process["path"] for process in summary["processes"]]
    text = ioassess("show", trace_dir)
    assert_clean_error(text, f"{victim}: {problem}")
    assert text.stdout.startswith(f"{len(traces) - 1} processes on 1 host")


def test_show_ignores_other_files_and_reads_several_directories(ioassess, trace_dir, tmp_path):
    (trace_dir / "notes.txt").write_text("not a trace")
    other = tmp_path / "more"
    other.mkdir()
    (other / "x.iot").write_bytes(b"junk")
    result, summary = show_json(ioassess, trace_dir, other)
    assert_clean_error(result, f"{other / 'x.iot'}: truncated: 4 bytes, the header alone needs 4096")
    assert summary["process_count"] == len(list(trace_dir.glob("*.iot")))


def test_show_without_traces(ioassess, tmp_path):
    assert_clean_error(ioassess("show", tmp_path / "missing"), f"{tmp_path / 'missing'}: no such file or directory")
    assert_clean_error(ioassess("show", tmp_path), f"{tmp_path}: no trace files (*.iot) in this directory")
    usage = ioassess("show")
    assert usage.returncode == 2 and len(stderr_lines(usage)) == 1 and "Traceback" not in usage.stderr


def test_file_system_of_gives_the_mount_df_names(tmp_path):
    for path in (tmp_path, "/proc/self", "/dev/shm"):
        df = subprocess.run(["df", "--output=fstype,target", str(path)], capture_output=True, text=True, check=True)
        fs_type, mount_point = df.stdout.splitlines()[1].split(maxsplit=1)
        assert file_system_of(str(path)) == (fs_type, mount_point)


# --- names from the job, printed for a terminal ----------------------------------------------

# File names with terminal controls (CSI clearing the screen, OSC setting the title, a C1 CSI),
# line breaks, and Unicode bidirectional controls (right-to-left override, isolates, marks).
CONTROL_NAMES = ["esc\x1b[2Jclear", "osc\x1b]0;title\x07end", "cr\rlf\nsplit", "c1\x9bcsi", "rlo\u202etxt.exe",
                 "lri\u2066x\u2069lrm\u200e"]
RAW_CONTROLS = "\x1b\x07\r\x9b\u202e\u2066\u2069\u200e"
SET_HOSTNAME_AND_EXEC = "import os, socket, sys; socket.sethostname(sys.argv[1]); os.execv(sys.argv[2], sys.argv[2:])"


@pytest.mark.root
def test_show_escapes_control_characters_in_names_from_the_job(ioassess, run_recorded, tmp_path):
    """A real program under the recorder, started from a directory and on a host whose names
    hold controls too, creates files with such names; `show` prints each name on its line with
    the controls escaped, its JSON keeps them exact, and an error naming such a file is one line."""
    files = tmp_path / "files"
    files.mkdir()
    exe = tmp_path / "bin\x1b[31m" / "dd"
    exe.parent.mkdir()
    shutil.copy(tool("dd"), exe)
    host = "host\x1b[2J\u202e"
    paths = [str(files / name) for name in CONTROL_NAMES]
    loop = 'for name in "$@"; do "$0" if=/dev/zero of="$name" bs=1M count=1 2>/dev/null; done'
    ran = run_recorded([tool("unshare"), "--uts", sys.executable, "-c", SET_HOSTNAME_AND_EXEC, host,
                        "/bin/sh", "-c", loop, exe, *paths], tmp_path / "traces")
    assert ran.returncode == 0, ran.stderr
    text = ioassess("show", tmp_path / "traces")
    assert text.returncode == 0, text.stderr
    assert not any(char in text.stdout for char in RAW_CONTROLS)
    lines = text.stdout.splitlines()
    for path in paths:
        assert any(line.endswith(f" {printable(path)}") for line in lines), printable(path)
    assert printable(host) in text.stdout and printable(str(exe)) in text.stdout
    _, summary = show_json(ioassess, tmp_path / "traces")
    assert set(paths) <= {f["name"] for f in summary["top_files"]}
    assert host in {h["hostname"] for h in summary["hosts"]}
    assert str(exe) in {p["exe"] for p in summary["processes"]}
    missing = tmp_path / "missing\x1b]0;title\x07\u202e.iot"   # (TraceFileError puts a line break as a space)
    assert_clean_error(ioassess("show", missing), f"{printable(str(missing))}: no such file or directory")


def test_show_as_root_takes_only_the_traces_of_the_directorys_owner(ioassess, run_recorded, job_user,
                                                                   searchable_tmp):
    """A user links another user's trace into their own trace directory: root's `show` of that
    directory refuses it, as `report` does, and prints none of its names; --owner chooses."""
    attacker = system_user(ATTACKER_USER)
    secret = searchable_tmp / "victims-secret-file-name"
    victim_dir, attacker_dir = searchable_tmp / "victim", searchable_tmp / "attacker"
    assert run_recorded(["dd", "if=/dev/zero", f"of={secret}", "bs=4k", "count=1"], victim_dir).returncode == 0
    assert run_recorded(["true"], attacker_dir).returncode == 0
    for directory, user in ((victim_dir, job_user), (attacker_dir, attacker)):
        for path in [directory, *directory.iterdir()]:
            os.chown(path, user.pw_uid, user.pw_gid)
    (victim_trace,) = victim_dir.glob("*.iot")
    link = attacker_dir / "z-linked.iot"
    link.symlink_to(victim_trace)
    os.lchown(link, attacker.pw_uid, attacker.pw_gid)
    for args in ([], ["--json"]):
        result = ioassess("show", *args, attacker_dir)
        assert result.returncode == 2 and "Traceback" not in result.stderr
        assert stderr_lines(result) == [f"ioassess: {link}: belongs to uid {job_user.pw_uid}, not to uid "
                                        f"{attacker.pw_uid} whose traces these are: refused"]
        assert secret.name not in result.stdout
    chosen = ioassess("show", "--owner", job_user.pw_name, victim_dir)
    assert chosen.returncode == 0 and secret.name in chosen.stdout


# OSC 52 (sets the terminal's clipboard), BEL, a clear screen and a C1 CSI
TERMINAL_CONTROLS = "\x1b]52;c;aGVsbG8=\x07\x1b[2J\x9b"


def test_models_escapes_control_characters_of_files_others_planted(job_user, installation_reachable,
                                                                    searchable_tmp):
    """Another user plants a model file named with terminal controls in a shared (1777) site
    model directory, and the user's own model holds them in its provenance: `ioassess models`,
    run by the user, prints both with the controls escaped, one line each."""
    attacker = system_user(ATTACKER_USER)
    site = searchable_tmp / "site"
    site.mkdir()
    os.chmod(site, 0o1777)
    planted = site / f"evil{TERMINAL_CONTROLS}.json"
    planted.write_text("{}")
    os.chown(planted, attacker.pw_uid, attacker.pw_gid)
    models = searchable_tmp / "data" / "ioassess" / "models"
    models.mkdir(parents=True)
    model = json.loads(pathlib.Path(model_path(DEFAULT_MODEL)).read_text())
    model["provenance"]["host"] = f"host{TERMINAL_CONTROLS}"
    (models / "mine.json").write_text(json.dumps(model))
    for path in (searchable_tmp / "data", searchable_tmp / "data" / "ioassess", models, models / "mine.json"):
        os.chown(path, job_user.pw_uid, job_user.pw_gid)
    result = subprocess.run([sys.executable, "-m", "ioassess", "models"], cwd="/", user=job_user.pw_uid,
                            group=job_user.pw_gid, extra_groups=[], capture_output=True, text=True, timeout=120,
                            env=clean_env({"PATH": "/usr/bin:/bin", "HOME": str(searchable_tmp),
                                           "XDG_DATA_HOME": str(searchable_tmp / "data"),
                                           "IOASSESS_SITE_MODELS": str(site)}))
    assert result.returncode == 0, result.stderr
    assert not any(char in result.stdout for char in "\x1b\x07\x9b")
    lines = result.stdout.splitlines()
    assert [line for line in lines if f"evil{printable(TERMINAL_CONTROLS)}" in line] == [
        f"  site     evil{printable(TERMINAL_CONTROLS)}  belongs to uid {attacker.pw_uid}, not to you or root: not "
        f"used; {printable(str(planted))}"]
    assert [line for line in lines if f"host {printable('host' + TERMINAL_CONTROLS)};" in line]


def test_report_never_replaces_a_device_fifo_or_directory_it_is_told_to_write(ioassess, tmp_path):
    """`-o /dev/null` as root would have put a regular file in the device's place (the report is
    renamed over its path): an output that names anything but a new or regular file (or a link)
    is refused in one line, exit 2, and stays what it was; --json too."""
    log = next(path for path in shipped_darshan_logs() if path.endswith("/sample.darshan"))
    fifo, directory = tmp_path / "fifo", tmp_path / "dir"
    os.mkfifo(fifo)
    directory.mkdir()
    for target, is_kind in ((fifo, stat.S_ISFIFO), (directory, stat.S_ISDIR)):
        result = ioassess("report", log, "-o", target)
        assert_clean_error(result, f"{target}: not a regular file: an output is written only to a new or regular file")
        assert is_kind(os.lstat(target).st_mode)
    result = ioassess("report", log, "-o", tmp_path / "r.html", "--json", fifo)
    assert result.returncode == 2 and stat.S_ISFIFO(os.lstat(fifo).st_mode), result.stderr
    assert [name for name in os.listdir(tmp_path) if name.endswith(".part")] == []
