"""The recorder built with AddressSanitizer and UndefinedBehaviorSanitizer (`make -C plugin asan`),
and with ThreadSanitizer (`make -C plugin tsan`), preloaded behind the sanitizer's runtime into the
threaded, forking, signal and SIGKILL test programs: each behaves as under the plain recorder (its
exit status, its output, a readable trace) and no sanitizer reports anything (every report goes to
a log file of the sanitizer's, and any file there fails the test).

ThreadSanitizer runs with symbolize=0: its symbolizer opens the executable through the recorder's
`open`, which waits on ioassess_lock, held by a thread that waits on the report being symbolized.
Its reports are symbolized here instead, with addr2line, for the failure message. Its thread leak
reports are off: the recorder starts no thread, and this runtime (GCC 12) reports the parent's
threads as leaked at the exit of every child of a multi-threaded fork, with or without the recorder."""
import ctypes
import os
import re
import subprocess
from collections import defaultdict

import pytest

from recorder_helpers import REPO, clean_env, describe, killme_killed, load, prog, select, tool, total_table

SANITIZERS = {
    # name: (runtime library, options variable, its options besides log_path)
    "asan": ("libasan.so", "ASAN_OPTIONS", "detect_leaks=0:halt_on_error=1"),
    "tsan": ("libtsan.so", "TSAN_OPTIONS", "halt_on_error=0:symbolize=0:report_thread_leaks=0"),
}


class Sanitized:
    """The recorder built under one sanitizer: how to run a program with it, where it logs."""

    def __init__(self, name, runtime, library, logs, preexec_fn):
        self.name, self.runtime, self.library, self.logs = name, runtime, library, logs
        self.preexec_fn = preexec_fn    # no_randomization if the runtime needs it, else None

    def env(self, trace_dir, **extra):
        trace_dir.mkdir(mode=0o700, exist_ok=True)
        _, variable, options = SANITIZERS[self.name]
        # Leaks are not checked: the recorder keeps its trace mappings until the process ends.
        env = {"LD_PRELOAD": f"{self.runtime}:{self.library}", "IOASSESS_TRACE_DIR": str(trace_dir),
               variable: f"{options}:log_path={self.logs}/{self.name}"}
        if self.name == "asan":
            env["UBSAN_OPTIONS"] = f"halt_on_error=1:print_stacktrace=1:log_path={self.logs}/ubsan"
        return clean_env({**env, **extra})


def runtime_path(name):
    path = subprocess.run(["gcc", f"-print-file-name={name}"], capture_output=True, text=True).stdout.strip()
    assert os.path.isabs(path), f"gcc has no {name} (Debian: libasan8, libtsan2, installed with gcc)"
    return path


ADDR_NO_RANDOMIZE = 0x0040000


def no_randomization():
    """In the child before exec, as `setarch -R` does (without a process of its own, which
    the recorder would trace): no address-space randomisation for it and what it execs."""
    personality = ctypes.CDLL(None, use_errno=True).personality
    personality(personality(0xFFFFFFFF) | ADDR_NO_RANDOMIZE)


def start_preexec(name, runtime, library):
    """None if the runtime starts here, else no_randomization: ThreadSanitizer's fixed memory
    layout does not fit every address-space randomisation (a kernel with more vm.mmap_rnd_bits
    than it was built for makes it stop with "unexpected memory mapping")."""
    if name != "tsan":
        return None
    env = clean_env({"LD_PRELOAD": f"{runtime}:{library}", "IOASSESS_DISABLE": "1"})
    for preexec_fn in (None, no_randomization):
        probe = subprocess.run(["/bin/true"], env=env, capture_output=True, timeout=60, preexec_fn=preexec_fn)
        if probe.returncode == 0:
            return preexec_fn
    pytest.fail(f"ThreadSanitizer does not start, even without address-space randomisation: {describe(probe)}")


@pytest.fixture(scope="module", params=sorted(SANITIZERS))
def sanitized(request, tmp_path_factory):
    name = request.param
    out = tmp_path_factory.mktemp(name)
    build = subprocess.run(["make", "-C", str(REPO / "plugin"), "--no-print-directory", f"OUT={out}", name],
                           capture_output=True, text=True)
    assert build.returncode == 0, build.stderr
    runtime = runtime_path(SANITIZERS[name][0])
    library = out / name / "libioassess.so"
    logs = out / "logs"
    logs.mkdir()
    return Sanitized(name, runtime, library, logs, start_preexec(name, runtime, library))


def run_sanitized(sanitized, cmd, trace_dir, **extra):
    result = subprocess.run([str(arg) for arg in cmd], env=sanitized.env(trace_dir, **extra), capture_output=True,
                            timeout=300, preexec_fn=sanitized.preexec_fn)
    assert_no_reports(sanitized, cmd[0])
    return result


def assert_no_reports(sanitized, program):
    reports = {path.name: symbolized(path.read_text(errors="replace"), sanitized, program)[:4000]
               for path in sanitized.logs.iterdir()}
    assert not reports, "sanitizer reports:\n" + "\n".join(f"--- {name}\n{text}" for name, text in reports.items())


FRAME = re.compile(r"<null> <null> \((?P<module>[^()\s+]+)\+(?P<offset>0x[0-9a-f]+)\)")
GLOBAL = re.compile(r"global '<null>' at 0x0+ \((?P<module>[^()\s+]+)\+(?P<offset>0x[0-9a-f]+)\)")


def symbolized(text, sanitized, program):
    """A report printed with symbolize=0 with the recorder's and the program's frames made
    `function file:line` (inlined calls joined with '<'), by addr2line, and the recorder's
    globals named, by nm."""
    paths = {os.path.basename(p): p for p in (str(sanitized.library), str(program))}
    text = GLOBAL.sub(lambda g: f"global '{global_at(paths.get(g['module']), int(g['offset'], 16))}' "
                                f"({g['module']}+{g['offset']})", text)
    wanted = defaultdict(set)
    for frame in FRAME.finditer(text):
        if frame["module"] in paths:
            wanted[frame["module"]].add(frame["offset"])
    names = {}
    for module, offsets in wanted.items():
        offsets = sorted(offsets)
        lines = subprocess.run(["addr2line", "-f", "-i", "-p", "-C", "-e", paths[module], *offsets],
                               capture_output=True, text=True).stdout.splitlines()
        located = []
        for line in lines:
            if line.startswith(" (inlined by) ") and located:
                located[-1] += " < " + line[len(" (inlined by) "):]
            else:
                located.append(line)
        if len(located) == len(offsets):
            names.update({(module, offset): where for offset, where in zip(offsets, located)})
    text = FRAME.sub(lambda f: f"{names.get((f['module'], f['offset']), '?')} ({f['module']}+{f['offset']})", text)
    return text.replace(f"{REPO}/", "")


def global_at(path, offset):
    """The name of the variable of the library at path that holds offset, '?' if none."""
    if path is None:
        return "?"
    symbols = subprocess.run(["nm", "-S", "--defined-only", path], capture_output=True, text=True).stdout
    for line in symbols.splitlines():
        fields = line.split()
        if len(fields) == 4 and int(fields[0], 16) <= offset < int(fields[0], 16) + int(fields[1], 16):
            return fields[3]
    return "?"


def test_sixteen_threads(sanitized, tmp_path):
    rec = run_sanitized(sanitized, [prog("threads16"), tmp_path / "t.dat", 200, 512], tmp_path / "traces")
    assert rec.returncode == 0 and b"pread 3200 pwrite 3200 bad 0" in rec.stdout, describe(rec)
    t = total_table(load(tmp_path / "traces"), by=("op",))
    assert (t[("pread",)]["count"], t[("pwrite",)]["count"]) == (3200, 3200)


@pytest.mark.parametrize("mode", ["read", "writev", "own", "handoff", "signal"])
def test_threads_at_positions(sanitized, tmp_path, mode):
    """Calls at positions shared by threads, owned by one thread each, owned then shared, and
    owned with a signal handler's calls inside the owner's (tests/test_recorder_offsets.py
    checks their offsets)."""
    threads = {"handoff": 2, "signal": 1}.get(mode, 4)
    rec = run_sanitized(sanitized, [prog("sharedpos"), mode, threads, 256, tmp_path / "shared.dat"],
                        tmp_path / "traces")
    printed, least = (b"HANDLER ", 200) if mode == "signal" else (b"CALL ", 256)
    assert rec.returncode == 0 and rec.stdout.count(printed) >= least, describe(rec)


def test_stdio_calls(sanitized, tmp_path):
    """Every wrapped stdio call, on files and on streams that are no files (tests/test_recorder_stdio.py
    checks what is recorded)."""
    (tmp_path / "plain").mkdir()
    (tmp_path / "rec").mkdir()
    plain = subprocess.run([prog("stdio_ops"), tmp_path / "plain", "popen"], capture_output=True, timeout=60)
    rec = run_sanitized(sanitized, [prog("stdio_ops"), tmp_path / "rec", "popen"], tmp_path / "traces")
    assert (rec.returncode, rec.stdout) == (0, plain.stdout), describe(rec)
    assert total_table(load(tmp_path / "traces"), by=("op",))[("fwrite",)]["count"] >= 2


def test_stdio_threads_on_their_own_and_a_shared_stream(sanitized, tmp_path):
    rec = run_sanitized(sanitized, [prog("stdio_threads"), tmp_path, 8, 500], tmp_path / "traces")
    assert rec.returncode == 0, describe(rec)
    t = total_table(load(tmp_path / "traces"), by=("op",))
    assert (t[("fwrite",)]["count"], t[("fprintf",)]["count"]) == (8000, 4000)


@pytest.mark.parametrize("threads", [4, 64])
def test_fork_while_other_threads_do_io(sanitized, tmp_path, threads):
    rec = run_sanitized(sanitized, [prog("forkthreads"), tmp_path, threads], tmp_path / "traces")
    assert rec.returncode == 0 and rec.stdout.endswith(b"ok\n"), describe(rec)
    assert len(re.findall(rb"child (\d+) pid (\d+)", rec.stdout)) == 20
    assert len(load(tmp_path / "traces").processes) == 21


@pytest.mark.parametrize("mode", ["fork", "exec", "execfail"])
def test_fork_and_exec(sanitized, tmp_path, mode):
    (tmp_path / "plain").mkdir()
    (tmp_path / "rec").mkdir()
    plain = subprocess.run([prog("forkexec"), mode, tmp_path / "plain"], capture_output=True, timeout=60)
    rec = run_sanitized(sanitized, [prog("forkexec"), mode, tmp_path / "rec"], tmp_path / "traces")
    assert rec.returncode == plain.returncode, describe(rec)
    assert load(tmp_path / "traces").processes


@pytest.mark.parametrize("cap", [None, "1000"])
def test_signal_handler_io_during_busy_read_loop(sanitized, tmp_path, cap):
    (tmp_path / "data").write_bytes(os.urandom(65536))
    extra = {"IOASSESS_MAX_RECORDS": cap} if cap else {}
    rec = run_sanitized(sanitized, [prog("sigloop"), tmp_path / "data", tmp_path / "log", "2000"],
                        tmp_path / "traces", **extra)
    assert rec.returncode == 0, describe(rec)
    assert re.search(rb"bad 0 handler_bad 0 log_size_ok 1", rec.stdout), rec.stdout


def test_sigkill_mid_write(sanitized, tmp_path):
    data, counter, traces = tmp_path / "data", tmp_path / "counter", tmp_path / "traces"
    completed, _ = killme_killed(data, counter, sanitized.env(traces), 20_000, preexec_fn=sanitized.preexec_fn)
    assert_no_reports(sanitized, prog("killme"))
    ts = load(traces)
    (process,) = ts.processes
    assert process.end_reason == "running/killed"
    assert completed <= int(select(ts, data, "pwrite").sum()) <= completed + 1


@pytest.mark.parametrize("program, args, requests", [("posixaio", [], 28), ("libaio_edges", [], 9), ("mapfiles", [], 4),
                                                     ("rawring", ["3"], 4)])
def test_asynchronous_io_and_mappings(sanitized, tmp_path, program, args, requests):
    """POSIX AIO (glibc's own threads complete the requests), libaio and its misuse, syscall(),
    mapped files and io_uring rings found at exit: as many records as under the plain recorder
    (tests/test_recorder_aio.py checks them)."""
    (tmp_path / "w").mkdir()
    rec = run_sanitized(sanitized, [prog(program), *(args or [tmp_path / "w"])], tmp_path / "traces")
    assert rec.returncode == 0, describe(rec)
    t = total_table(load(tmp_path / "traces", meta=True), by=("op",))
    assert sum(row["count"] for (op,), row in t.items() if op.startswith("aio_") or op in ("mmap", "io_uring")) == \
        requests, t


def test_fio_libaio(sanitized, tmp_path):
    """fio's libaio engine, requests in flight 8 at a time: every one recorded once."""
    rec = run_sanitized(sanitized, [tool("fio"), "--name=r", f"--filename={tmp_path / 'f.dat'}", "--size=4M",
                                    "--rw=randread", "--bs=4k", "--direct=1", "--ioengine=libaio", "--iodepth=8",
                                    "--number_ios=500", "--output-format=json"], tmp_path / "traces")
    assert rec.returncode == 0, describe(rec)
    assert total_table(load(tmp_path / "traces"), by=("op",))[("aio_read",)]["count"] == 500


def test_a_trace_truncated_while_the_program_runs(sanitized, tmp_path):
    """tests/test_recorder_storage.py's trace truncated while its program runs: the recorder's SIGBUS
    handler replaces the trace's mappings with memory and stops recording, beside the program's
    own SIGBUS handler (the sanitizer's runtime has one of its own too)."""
    (tmp_path / "work").mkdir()
    trace_dir = tmp_path / "traces"
    proc = subprocess.Popen([prog("sigbus"), "sigaction", tmp_path / "work" / "data"], env=sanitized.env(trace_dir),
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, preexec_fn=sanitized.preexec_fn)
    head = [proc.stdout.readline(), proc.stdout.readline()]
    assert head[-1] == b"ready\n", head
    (trace,) = trace_dir.glob("*.iot")
    os.truncate(trace, 0)
    rest, _ = proc.communicate(b"go\n", timeout=300)
    assert_no_reports(sanitized, prog("sigbus"))
    assert proc.returncode == 0 and rest == b"wrote 2000\ncaught SIGBUS sent\ncaught SIGBUS at its mapping\ndone\n"
    (process,) = load(trace_dir).processes
    assert process.stopped and process.ops_lost >= 1000
