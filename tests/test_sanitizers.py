"""The recorder built with AddressSanitizer and UndefinedBehaviorSanitizer (`make -C plugin asan`),
preloaded behind the sanitizers' runtime into the threaded, forking, signal and SIGKILL test
programs: each behaves as under the plain recorder (its exit status, its output, a readable
trace) and neither sanitizer reports anything (any report fails the run: halt_on_error)."""
import os
import re
import subprocess

import pytest

from recorder_helpers import REPO, clean_env, describe, killme_killed, load, prog, select, total_table


@pytest.fixture(scope="module")
def asan_recorder(tmp_path_factory):
    """(LD_PRELOAD value, directory the sanitizers log into) of the sanitized recorder."""
    out = tmp_path_factory.mktemp("asan")
    build = subprocess.run(["make", "-C", str(REPO / "plugin"), "--no-print-directory", f"OUT={out}", "asan"],
                           capture_output=True, text=True)
    assert build.returncode == 0, build.stderr
    runtime = subprocess.run(["gcc", "-print-file-name=libasan.so"], capture_output=True, text=True).stdout.strip()
    assert os.path.isabs(runtime), "gcc has no libasan.so (Debian: libasan8, installed with gcc)"
    logs = out / "logs"
    logs.mkdir()
    return f"{runtime}:{out / 'asan' / 'libioassess.so'}", logs


def sanitized_env(asan_recorder, trace_dir, **extra):
    preload, logs = asan_recorder
    trace_dir.mkdir(mode=0o700, exist_ok=True)
    # Leaks are not checked: the recorder keeps its trace mappings until the process ends.
    return clean_env({"LD_PRELOAD": preload, "IOASSESS_TRACE_DIR": str(trace_dir),
                      "ASAN_OPTIONS": f"detect_leaks=0:halt_on_error=1:log_path={logs}/asan",
                      "UBSAN_OPTIONS": f"halt_on_error=1:print_stacktrace=1:log_path={logs}/ubsan", **extra})


def run_sanitized(asan_recorder, cmd, trace_dir, **extra):
    result = subprocess.run([str(arg) for arg in cmd], env=sanitized_env(asan_recorder, trace_dir, **extra),
                            capture_output=True, timeout=300)
    assert_no_reports(asan_recorder)
    return result


def assert_no_reports(asan_recorder):
    _, logs = asan_recorder
    reports = {path.name: path.read_text(errors="replace")[:2000] for path in logs.iterdir()}
    assert not reports, f"sanitizer reports: {reports}"


def test_sixteen_threads(asan_recorder, tmp_path):
    rec = run_sanitized(asan_recorder, [prog("threads16"), tmp_path / "t.dat", 200, 512], tmp_path / "traces")
    assert rec.returncode == 0 and b"pread 3200 pwrite 3200 bad 0" in rec.stdout, describe(rec)
    t = total_table(load(tmp_path / "traces"), by=("op",))
    assert (t[("pread",)]["count"], t[("pwrite",)]["count"]) == (3200, 3200)


@pytest.mark.parametrize("threads", [4, 64])
def test_fork_while_other_threads_do_io(asan_recorder, tmp_path, threads):
    rec = run_sanitized(asan_recorder, [prog("forkthreads"), tmp_path, threads], tmp_path / "traces")
    assert rec.returncode == 0 and rec.stdout.endswith(b"ok\n"), describe(rec)
    assert len(re.findall(rb"child (\d+) pid (\d+)", rec.stdout)) == 20
    assert len(load(tmp_path / "traces").processes) == 21


@pytest.mark.parametrize("mode", ["fork", "exec", "execfail"])
def test_fork_and_exec(asan_recorder, tmp_path, mode):
    (tmp_path / "plain").mkdir()
    (tmp_path / "rec").mkdir()
    plain = subprocess.run([prog("forkexec"), mode, tmp_path / "plain"], capture_output=True, timeout=60)
    rec = run_sanitized(asan_recorder, [prog("forkexec"), mode, tmp_path / "rec"], tmp_path / "traces")
    assert rec.returncode == plain.returncode, describe(rec)
    assert load(tmp_path / "traces").processes


@pytest.mark.parametrize("cap", [None, "1000"])
def test_signal_handler_io_during_busy_read_loop(asan_recorder, tmp_path, cap):
    (tmp_path / "data").write_bytes(os.urandom(65536))
    extra = {"IOASSESS_MAX_RECORDS": cap} if cap else {}
    rec = run_sanitized(asan_recorder, [prog("sigloop"), tmp_path / "data", tmp_path / "log", "2000"],
                        tmp_path / "traces", **extra)
    assert rec.returncode == 0, describe(rec)
    assert re.search(rb"bad 0 handler_bad 0 log_size_ok 1", rec.stdout), rec.stdout


def test_sigkill_mid_write(asan_recorder, tmp_path):
    data, counter, traces = tmp_path / "data", tmp_path / "counter", tmp_path / "traces"
    completed, _ = killme_killed(data, counter, sanitized_env(asan_recorder, traces), 20_000)
    assert_no_reports(asan_recorder)
    ts = load(traces)
    (process,) = ts.processes
    assert process.end_reason == "running/killed"
    assert completed <= int(select(ts, data, "pwrite").sum()) <= completed + 1
