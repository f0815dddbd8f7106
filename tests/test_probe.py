"""The file-system probe (docs/probe.md) run for real: on this machine's ext4, a tmpfs and a
ramfs (which refuses O_DIRECT), killed and restarted, with a full and a vanished target, a full
store disk and bad settings; its slowdown over made-up history and under fio hammering the disk,
in its own report, its Prometheus metrics and a job's report; its store read by another user."""
import datetime
import json
import math
import os
import pathlib
import re
import resource
import select
import signal
import socket
import sqlite3
import subprocess
import sys
import time
import urllib.request

import numpy as np
import pytest

from ioassess.site.probe.target import IO_DIRECT, IO_FALLBACK, OPS, POOL_FILE_BYTES
from probe_stores import ENDLESS, endless_store, probe_store
from recorder_helpers import clean_env

WAIT_S = 60
REPO = pathlib.Path(__file__).resolve().parents[1]


def mount(fs_type, directory, options=()):
    directory.mkdir(parents=True, exist_ok=True)
    subprocess.run(["mount", "-t", fs_type, *(["-o", ",".join(options)] if options else []), fs_type,
                    str(directory)], check=True)
    return directory


@pytest.fixture
def mounts():
    """mounts(fs_type, directory, options): mounted for the test, unmounted after it."""
    made = []

    def make(fs_type, directory, options=()):
        made.append(mount(fs_type, directory, options))
        return directory
    yield make
    for directory in reversed(made):
        subprocess.run(["umount", "-l", str(directory)], check=False)


def write_config(path, db, targets, interval="0.05s"):
    lines = ["[probe]", f"db = {db}", f"interval = {interval}", ""]
    for name, directory, data_size, pool_files in targets:
        lines += [f"[target {name}]", f"dir = {directory}", f"data_size = {data_size}",
                  f"pool_files = {pool_files}", ""]
    path.write_text("\n".join(lines))
    return path


def query(db, sql, *args):
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as connection:
        return connection.execute(sql, args).fetchall()


def rows_of(db, name):
    if not os.path.exists(db):
        return 0
    try:
        return query(db, "SELECT count(*) FROM samples JOIN targets ON id = target WHERE name = ?", name)[0][0]
    except sqlite3.OperationalError:   # the tables are not made yet
        return 0


def wait_for(condition, what):
    deadline = time.monotonic() + WAIT_S
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"waited {WAIT_S} s for {what}")
        time.sleep(0.02)


def test_probe_times_every_op_of_every_target_in_order(ioassess, tmp_path, mounts):
    tmpfs = mounts("tmpfs", tmp_path / "tmpfs", ["size=64m"])
    ramfs = mounts("ramfs", tmp_path / "ramfs")
    (tmp_path / "ext4").mkdir()
    db = tmp_path / "probe.sqlite"
    config = write_config(tmp_path / "probe.conf", db, [("ext4", tmp_path / "ext4", "8M", 40),
                                                       ("tmpfs", tmpfs, "4M", 30), ("ramfs", ramfs, "2M", 20)])
    result = ioassess("probe", "run", "--config", str(config), "--rounds", "6")
    assert result.returncode == 0, result.stderr
    assert result.stderr.splitlines()[-1] == "ioassess probe: stopped after 6 rounds"
    assert query(db, "PRAGMA journal_mode") == [("delete",)]   # stopped: readable from a read-only directory
    targets = {name: (io_mode, data_size, pool_files) for name, io_mode, data_size, pool_files
               in query(db, "SELECT name, io_mode, data_size, pool_files FROM targets")}
    assert targets == {"ext4": (IO_DIRECT, 8 << 20, 40), "tmpfs": (IO_DIRECT, 4 << 20, 30),
                       "ramfs": (IO_FALLBACK, 2 << 20, 20)}
    for name, directory, size, files in (("ext4", tmp_path / "ext4", 8 << 20, 40), ("tmpfs", tmpfs, 4 << 20, 30),
                                         ("ramfs", ramfs, 2 << 20, 20)):
        rows = query(db, "SELECT op, start_us, ns FROM samples JOIN targets ON id = target WHERE name = ? "
                         "ORDER BY start_us", name)
        assert [op for op, _, _ in rows] == list(range(len(OPS))) * 6   # every op of every round, in order
        assert all(ns > 0 for _, _, ns in rows)
        home = directory / "ioassess-probe"
        assert (home / "data").stat().st_size == size
        pool = sorted(int(entry.name) for entry in (home / "pool").iterdir())
        assert pool == list(range(6, files + 6))   # six oldest deleted, six new made
        assert {(home / "pool" / str(n)).stat().st_size for n in pool} == {POOL_FILE_BYTES}

    report = ioassess("probe", "report", "--db", str(db), "--since", "1h", "--json", str(tmp_path / "probe.json"))
    assert report.returncode == 0, report.stderr
    for target in json.loads((tmp_path / "probe.json").read_text())["targets"]:   # a quiet machine: near normal
        assert all(0.5 < kind["overall"]["median"] < 2 for kind in target["kinds"].values()), target["kinds"]

    cleanup = ioassess("probe", "run", "--config", str(config), "--cleanup")
    assert cleanup.returncode == 0, cleanup.stderr
    assert "ioassess probe: ext4: removed 42 files" in cleanup.stderr.splitlines()   # pool, data, lock
    assert not (tmp_path / "ext4" / "ioassess-probe").exists() and not (tmpfs / "ioassess-probe").exists()
    assert db.exists()


@pytest.mark.slow
def test_a_minute_of_probing_this_machines_ext4_and_a_tmpfs_records_every_op_near_normal(ioassess, tmp_path,
                                                                                          mounts):
    """The probe as deployed: one round a second for 60 s, on ext4 and on a tmpfs."""
    tmpfs = mounts("tmpfs", tmp_path / "tmpfs", ["size=64m"])
    (tmp_path / "ext4").mkdir()
    db = tmp_path / "probe.sqlite"
    config = write_config(tmp_path / "probe.conf", db, [("ext4", tmp_path / "ext4", "64M", 100),
                                                       ("tmpfs", tmpfs, "16M", 100)], interval="1s")
    result = ioassess("probe", "run", "--config", str(config), "--rounds", "60")
    assert result.returncode == 0, result.stderr
    for name in ("ext4", "tmpfs"):
        ops = [op for (op,) in query(db, "SELECT op FROM samples JOIN targets ON id = target WHERE name = ? "
                                         "ORDER BY start_us", name)]
        assert ops == list(range(len(OPS))) * 60, name
    first, last = query(db, "SELECT min(start_us), max(start_us) FROM samples")[0]
    assert 58 <= (last - first) / 1e6 < 75   # 59 intervals between the first and the last round
    report = ioassess("probe", "report", "--db", str(db), "--since", "1h", "--json", str(tmp_path / "probe.json"))
    assert report.returncode == 0, report.stderr
    for target in json.loads((tmp_path / "probe.json").read_text())["targets"]:
        assert all(0.5 < kind["overall"]["median"] < 2 for kind in target["kinds"].values()), target["kinds"]


def test_sigkill_mid_round_leaves_a_whole_store_that_a_restart_continues(ioassess, start_ioassess, tmp_path):
    (tmp_path / "fs").mkdir()
    db = tmp_path / "probe.sqlite"
    config = write_config(tmp_path / "probe.conf", db, [("fs", tmp_path / "fs", "4M", 10)], interval="1ms")
    probe = start_ioassess("probe", "run", "--config", str(config))
    wait_for(lambda: rows_of(db, "fs") >= 40 * len(OPS), "40 rounds")
    probe.send_signal(signal.SIGKILL)
    probe.communicate(timeout=WAIT_S)
    assert query(db, "PRAGMA journal_mode") == [("wal",)]
    assert query(db, "PRAGMA integrity_check") == [("ok",)]
    before = query(db, "SELECT max(start_us), count(*) FROM samples")[0]

    restart = ioassess("probe", "run", "--config", str(config), "--rounds", "3")
    assert restart.returncode == 0, restart.stderr
    assert query(db, "SELECT count(*) FROM targets") == [(1,)]
    after = query(db, "SELECT count(*) FROM samples WHERE start_us > ?", before[0])[0][0]
    assert after == 3 * len(OPS) and query(db, "SELECT count(*) FROM samples")[0][0] == before[1] + after
    assert len(list((tmp_path / "fs" / "ioassess-probe" / "pool").iterdir())) == 10

    probe = start_ioassess("probe", "run", "--config", str(config))
    wait_for(lambda: rows_of(db, "fs") >= before[1] + after + 10 * len(OPS), "10 more rounds")
    probe.send_signal(signal.SIGTERM)
    _, stderr = probe.communicate(timeout=WAIT_S)
    assert probe.returncode == 0, stderr
    assert stderr.splitlines()[-1].startswith("ioassess probe: stopped after ")
    assert query(db, "PRAGMA integrity_check") == [("ok",)]


def test_full_and_vanished_targets_log_one_line_each_and_the_others_are_still_probed(start_ioassess, tmp_path,
                                                                                    mounts):
    small = mounts("tmpfs", tmp_path / "small", ["size=4m"])
    (tmp_path / "steady").mkdir()
    (tmp_path / "vanishing").mkdir()
    db = tmp_path / "probe.sqlite"
    config = write_config(tmp_path / "probe.conf", db, [("steady", tmp_path / "steady", "4M", 10),
                                                       ("small", small, "1M", 10),
                                                       ("vanishing", tmp_path / "vanishing", "1M", 10)])
    probe = start_ioassess("probe", "run", "--config", str(config))
    wait_for(lambda: all(rows_of(db, name) >= 2 * len(OPS) for name in ("steady", "small", "vanishing")),
             "two rounds of every target")
    filler = small / "filler"
    with open(filler, "wb") as out:   # fill the small file system to the last byte
        try:
            while True:
                out.write(b"\0" * 65536)
                out.flush()
        except OSError:
            pass
    subprocess.run(["rm", "-rf", str(tmp_path / "vanishing")], check=True)
    steady = rows_of(db, "steady")
    wait_for(lambda: rows_of(db, "steady") >= steady + 20 * len(OPS), "20 rounds of the steady target")
    small_rows = rows_of(db, "small")
    assert small_rows < rows_of(db, "steady")
    filler.unlink()
    wait_for(lambda: rows_of(db, "small") >= small_rows + 2 * len(OPS), "the small target probed again")
    probe.send_signal(signal.SIGTERM)
    _, stderr = probe.communicate(timeout=WAIT_S)
    assert probe.returncode == 0
    lines = stderr.splitlines()
    full = [line for line in lines if line.startswith("ioassess probe: small: ")]
    assert len(full) == 2 and full[1] == "ioassess probe: small: probing again", full
    assert re.fullmatch(rf"ioassess probe: small: create: {small}/ioassess-probe/pool/\d+: No space left on device",
                        full[0]), full
    vanished = [line for line in lines if line.startswith("ioassess probe: vanishing: ")]
    assert len(vanished) == 1 and vanished[0].endswith("No such file or directory"), vanished
    assert not any(line.startswith("ioassess probe: steady: ") for line in lines)


@pytest.mark.parametrize("text, problem", [
    (None, "cannot read the settings: No such file or directory"),
    ("[probe]\ninterval = soon\n[target a]\ndir = /tmp\n",
     "[probe] interval: not an interval: 'soon' (e.g. 1s, 500ms, 10m, 4h)"),
    ("[probe]\ndb = /tmp/x.sqlite\n", "no [target NAME] section: nothing to probe"),
    ("[target a]\ndir = /tmp\ncolour = blue\n",
     "[target a]: unknown setting 'colour' (known: dir, data_size, pool_files)"),
    ("[target a]\ndata_size = 1k\ndir = /tmp\n", "[target a] data_size: data_size '1k' is below 1 MiB"),
    ("[target a]\ndata_size = 1G\n", "[target a] needs dir = DIRECTORY"),
    ("[elsewhere]\n", "unknown section [elsewhere] (known: [probe], [target NAME])"),
    ("dir = /tmp\n", "not a settings file: File contains no section headers."),
])
def test_bad_config_is_one_line_naming_the_file_and_status_2(ioassess, tmp_path, text, problem):
    config = tmp_path / "probe.conf"
    if text is not None:
        config.write_text(text)
    result = ioassess("probe", "run", "--config", str(config))
    assert result.returncode == 2
    assert result.stderr.splitlines()[0].startswith(f"ioassess: {config}: {problem}")
    assert len(result.stderr.splitlines()) == 1, result.stderr


def test_a_directory_that_is_missing_or_not_one_is_refused_before_anything_is_probed(ioassess, tmp_path):
    """Before: the probe ran its rounds probing nothing and ended "stopped after 20 rounds"."""
    (tmp_path / "file").write_text("")
    db = tmp_path / "probe.sqlite"
    for directory, problem in ((tmp_path / "missing", "No such file or directory"),
                               (tmp_path / "file", "not a directory")):
        result = ioassess("probe", "run", "--dir", directory, "--db", db, "--rounds", "20")
        assert (result.returncode, result.stderr) == (2, f"ioassess: {directory}: {problem}: nothing to probe\n")
        config = write_config(tmp_path / "probe.conf", db, [("here", tmp_path, "1M", 5), ("gone", directory, "1M", 5)])
        result = ioassess("probe", "run", "--config", config, "--rounds", "20")
        assert (result.returncode, result.stderr) == (2, f"ioassess: {directory}: {problem}: nothing to probe\n")
    assert not db.exists()


def test_a_second_probe_of_a_directory_is_refused_and_the_first_goes_on(ioassess, start_ioassess, tmp_path):
    """Two probes of one directory took each other's pool files: "File exists" and "probing
    again" every round. The first holds the directory's lock: a second, or a target named twice,
    is refused in one line naming the first; --cleanup waits for it to end."""
    (tmp_path / "fs").mkdir()
    db = tmp_path / "probe.sqlite"
    common = ("--dir", str(tmp_path / "fs"), "--data-size", "2M", "--pool-files", "5")
    first = start_ioassess("probe", "run", *common, "--db", str(db), "--interval", "0.05s")
    wait_for(lambda: rows_of(db, str(tmp_path / "fs")) >= 2 * len(OPS), "two rounds")
    taken = f"{tmp_path / 'fs'}: another probe is probing it (pid {first.pid} on {os.uname().nodename})"
    second = ioassess("probe", "run", *common, "--db", str(tmp_path / "second.sqlite"), "--rounds", "3")
    assert (second.returncode, second.stderr) == (2, f"ioassess: {taken}\n")
    cleanup = ioassess("probe", "run", *common, "--cleanup")
    assert (cleanup.returncode, cleanup.stderr) == (2, f"ioassess probe: {tmp_path / 'fs'}: {taken}\n")
    rounds = rows_of(db, str(tmp_path / "fs"))
    wait_for(lambda: rows_of(db, str(tmp_path / "fs")) >= rounds + 5 * len(OPS), "five more rounds")
    first.send_signal(signal.SIGTERM)
    _, stderr = first.communicate(timeout=WAIT_S)
    assert first.returncode == 0 and len(stderr.splitlines()) == 2, stderr   # probing ..., stopped after ...
    twice = write_config(tmp_path / "probe.conf", db, [(name, tmp_path / "fs", "2M", 5) for name in "ab"])
    result = ioassess("probe", "run", "--config", twice, "--rounds", "1")
    assert (result.returncode, result.stderr) == (2, f"ioassess: {twice}: [target b] dir {tmp_path / 'fs'}: "
                                                     "also the dir of [target a]\n")
    cleanup = ioassess("probe", "run", *common, "--cleanup")
    assert cleanup.returncode == 0 and not (tmp_path / "fs" / "ioassess-probe").exists()


def test_an_output_that_cannot_be_written_is_named_by_its_path(ioassess, history, tmp_path):
    """Not by the temporary file beside it (.x.html.XXXX.part)."""
    store = history[0]
    for args in (["probe", "report", "--db", store.path, "-o"], ["probe", "report", "--db", store.path, "--json"]):
        result = ioassess(*args, tmp_path / "nodir" / "x.html")
        assert (result.returncode, result.stderr) == (2, f"ioassess: {tmp_path / 'nodir' / 'x.html'}: No such file or "
                                                         "directory\n")


DATA_OPS = ["read_1MiB", "write_1MiB", "read_4KiB", "write_4KiB"]


@pytest.fixture
def history(tmp_path):
    """Three hours of rounds every second, data ops 5x slower for 40 minutes of the second
    hour, aggregated as the probe does it."""
    from ioassess.site.probe.config import Target
    from ioassess.site.probe.store import Store
    from ioassess.site.probe.synthetic import add_history
    store = Store(str(tmp_path / "history.sqlite"), writable=True)
    target = store.target_id(Target("scratch", "/scratch", 1 << 30, 10_000), IO_DIRECT)
    start = 1_700_000_000 // 3600 * 3600
    add_history(store, target, start, 3 * 3600, [(start + 3600, start + 3600 + 2400, 5.0, DATA_OPS)])
    store.aggregate(start + 3 * 3600 + 1)
    return store, target, start


def test_aggregates_and_slowdown_of_a_history_with_a_slow_span(history, ioassess, tmp_path):
    from ioassess.site.probe.slowdown import normals, probe_slowdown, slow_spans
    store, target, start = history
    assert store.db.execute("SELECT DISTINCT count FROM minutes").fetchall() == [(60,)]
    assert store.db.execute("SELECT count(*) FROM minutes").fetchone()[0] == 3 * 60 * len(OPS)
    ops, _, seconds = store.raw(target, start, start + 3 * 3600)
    exact = [float(np.median(seconds[ops == op])) for op in range(len(OPS))]
    normal, counts = normals(store, target, start + 3 * 3600, 30)
    assert counts == [3 * 3600] * len(OPS)
    assert normal == pytest.approx(exact, rel=0.01)   # the hourly histograms' median, 1 % bins

    slowdown = probe_slowdown(store, "scratch", start, start + 3 * 3600, 600)
    assert slowdown["source"] == "raw rows"
    for kind in ("read", "write"):
        medians = slowdown["kinds"][kind]["median"]
        assert all(4 < m < 6 for m in medians[6:10]) and all(0.6 < m < 1.6 for m in medians[:6] + medians[10:])
    assert all(0.6 < m < 1.6 for m in slowdown["kinds"]["metadata"]["median"])
    assert [(s["kind"], s["start"] - start, s["end"] - start) for s in slow_spans(slowdown, 2.0)] == \
        [("read", 3600, 6000), ("write", 3600, 6000)]

    # The raw rows of the first two hours gone, hourly intervals and the normal stay.
    store.prune(start + 2 * 3600 + 30 * 86400, 30, 365)
    assert store.oldest_raw(target) == pytest.approx(start + 2 * 3600, abs=1)
    assert normals(store, target, start + 3 * 3600, 30)[0] == normal
    hourly = probe_slowdown(store, "scratch", start, start + 3 * 3600)
    assert hourly["source"] == "hourly histograms" and hourly["interval_seconds"] == 3600
    assert [m > 3 for m in hourly["kinds"]["read"]["median"]] == [False, True, False]

    db = store.path
    store.close()
    iso = lambda seconds: datetime.datetime.fromtimestamp(seconds).isoformat()   # noqa: E731
    result = ioassess("probe", "report", "--db", db, "--since", iso(start), "--until", iso(start + 3 * 3600),
                      "--interval", "4h", "-o", str(tmp_path / "probe.html"), "--json", str(tmp_path / "probe.json"))
    assert result.returncode == 0, result.stderr
    report = json.loads((tmp_path / "probe.json").read_text())
    assert [t["target"] for t in report["targets"]] == ["scratch"]
    assert report["targets"][0]["interval_seconds"] == 4 * 3600
    page = (tmp_path / "probe.html").read_text()
    assert "<svg" in page and "scratch" in page and "<script" not in page
    assert "No interval with a median slowdown" in page   # over four hours the 40 slow minutes are smeared


@pytest.mark.parametrize("args, problem", [
    (["--since", "1h", "--until=-2h"], "--since 1h is not before --until -2h"),
    (["--since", "yesterday"], "not a time: 'yesterday'"),
    (["--target", "home"], "no target home (it has: scratch)"),
])
def test_probe_report_refuses_bad_windows_in_one_line(history, ioassess, args, problem):
    store = history[0]
    result = ioassess("probe", "report", "--db", store.path, *args)
    assert result.returncode == 2 and problem in result.stderr and len(result.stderr.splitlines()) == 1, \
        result.stderr


def test_probe_report_of_a_damaged_store_is_one_line(ioassess, tmp_path):
    damaged_store(tmp_path / "probe.sqlite")
    result = ioassess("probe", "report", "--db", str(tmp_path / "probe.sqlite"), "-o", str(tmp_path / "p.html"))
    assert result.returncode == 2 and not (tmp_path / "p.html").exists()
    assert result.stderr.startswith(f"ioassess: {tmp_path / 'probe.sqlite'}: not a probe store (") and \
        len(result.stderr.splitlines()) == 1, result.stderr


def run_as(user, *args, cwd, env=None):
    """The installed CLI run as user, with only PATH and env from outside."""
    return subprocess.run([sys.executable, "-m", "ioassess", *map(str, args)], cwd=cwd, user=user.pw_uid,
                          group=user.pw_gid, extra_groups=[], capture_output=True, text=True, timeout=WAIT_S,
                          env=clean_env({"PATH": "/usr/bin:/bin", **(env or {})}))


def test_a_store_of_endless_samples_is_refused_and_the_job_ends_with_its_status(ioassess, job_user,
                                                                                 installation_reachable,
                                                                                 searchable_tmp):
    """A user's `ioassess run` whose application exits 3, with a store whose samples are an
    endless recursive view (as the site's probe_db every user's run reads): the application's
    status, the report made, the store named with its problem; `probe report` and `report`
    refuse it in one line."""
    db = endless_store(searchable_tmp / "probe.sqlite")
    problem = f"{db}: not a probe store (samples is a view)"
    work = searchable_tmp / "job"
    work.mkdir()
    os.chown(work, job_user.pw_uid, job_user.pw_gid)
    run = run_as(job_user, "run", "--trace-dir", work / "t", "--", "sh", "-c", "exit 3", cwd=work,
                 env={"IOASSESS_PROBE_DB": str(db)})
    assert run.returncode == 3, run.stderr
    assert json.loads((work / "t" / "assessment.json").read_text())["file_system"]["problem"] == problem
    report = run_as(job_user, "report", work / "t", "--probe-db", db, "-o", work / "r.html", "--json",
                    work / "r.json", cwd=work)
    assert report.returncode == 0, report.stderr
    assert json.loads((work / "r.json").read_text())["file_system"]["problem"] == problem
    probe_report = ioassess("probe", "report", "--db", db, "-o", searchable_tmp / "p.html")
    assert (probe_report.returncode, probe_report.stderr) == (2, f"ioassess: {problem}\n")


def test_a_store_is_read_within_its_bounds(tmp_path):
    """Read-only, values no longer than the probe writes, records no larger than SQLite's memory
    limit, targets counted, and a time limit that stops a query under way: each past its bound
    is one StoreError naming the store."""
    from ioassess.site.probe.store import HEAP_LIMIT_BYTES, MAX_TARGETS, MAX_VALUE_BYTES, Store, StoreError
    db = tmp_path / "probe.sqlite"
    store = Store(str(probe_store(db)), writable=True)
    store.db.execute("INSERT INTO meta VALUES ('aggregated_until', zeroblob(?))", (MAX_VALUE_BYTES + 1,))
    store.db.execute("INSERT INTO hours VALUES (1, 0, 0, zeroblob(?), x'01000000')", (2 * HEAP_LIMIT_BYTES,))
    store.close()
    assert_store_error(db, "not a probe store (string or blob too big)", lambda reader: reader.aggregated_until())
    assert_store_error(db, "not a probe store (reading it takes more than 64 MiB)",
                       lambda reader: reader.oldest_hour(1))
    with pytest.raises(sqlite3.OperationalError, match="readonly"):
        Store(str(db)).db.execute("DELETE FROM meta")

    store = Store(str(db), writable=True)
    store.db.executemany("INSERT INTO targets (name, dir, data_size, pool_files) VALUES (?, '/', 1, 1)",
                         [(f"t{i}",) for i in range(MAX_TARGETS)])
    store.close()
    assert_store_error(db, f"more than {MAX_TARGETS} targets to read at once", lambda reader: reader.targets())

    endless = f"{ENDLESS} SELECT x FROM n"
    with pytest.raises(StoreError, match=f"^{re.escape(str(db))}: reading it took longer than 0.5 s: stopped$"):
        Store(str(db), time_limit_s=0.5)._rows(endless, (), 1 << 62, "rows")
    with pytest.raises(StoreError, match=f"^{re.escape(str(db))}: reading it took longer than 0 s: stopped$"):
        Store(str(db), time_limit_s=0)


def assert_store_error(db, problem, read):
    from ioassess.site.probe.store import Store, StoreError
    with pytest.raises(StoreError) as raised:
        read(Store(str(db)))
    assert str(raised.value) == f"{db}: {problem}"


def test_probe_report_without_a_store_says_so(ioassess, tmp_path):
    result = ioassess("probe", "report", "--db", str(tmp_path / "none.sqlite"))
    assert result.returncode == 2
    assert result.stderr == f"ioassess: {tmp_path / 'none.sqlite'}: no probe store there\n"


@pytest.mark.slow
def test_fio_hammering_the_disk_shows_in_the_probe_and_in_a_job_report_of_that_window(ioassess, start_ioassess,
                                                                                       tmp_path):
    from ioassess.site.probe.slowdown import probe_slowdown
    from ioassess.site.probe.store import Store
    (tmp_path / "fs").mkdir()
    (tmp_path / "fio").mkdir()
    db = tmp_path / "probe.sqlite"
    config = write_config(tmp_path / "probe.conf", db, [("disk", tmp_path / "fs", "64M", 50)], interval="0.1s")
    probe = start_ioassess("probe", "run", "--config", str(config))
    # More quiet rounds than loud ones (20 s of fio), so that the normal (the median of all) is a
    # quiet one.
    wait_for(lambda: rows_of(db, "disk") >= 300 * len(OPS), "300 quiet rounds")
    quiet_end = time.time()
    fio = subprocess.Popen(["fio", "--name=hammer", f"--directory={tmp_path / 'fio'}", "--rw=randrw", "--bs=1M",
                            "--size=256M", "--direct=1", "--ioengine=libaio", "--iodepth=32", "--numjobs=2",
                            "--time_based", "--runtime=20", "--output=/dev/null"])
    hammered = rows_of(db, "disk")
    wait_for(lambda: rows_of(db, "disk") >= hammered + 5 * len(OPS), "5 rounds under fio")
    job_dir = tmp_path / "job"
    job_dir.mkdir()
    job = ioassess("run", "--trace-dir", str(job_dir / "traces"), "--", "sh", "-c",
                   f"dd if=/dev/zero of={job_dir}/out bs=1M count=32 oflag=direct 2>/dev/null; sleep 2; "
                   f"dd if={job_dir}/out of=/dev/null bs=1M iflag=direct 2>/dev/null",
                   env={"IOASSESS_PROBE_DB": str(db)})
    assert job.returncode == 0, job.stderr
    assert fio.wait(timeout=WAIT_S) == 0
    fio_end = time.time()
    after = rows_of(db, "disk")
    wait_for(lambda: rows_of(db, "disk") >= after + 10 * len(OPS), "10 quiet rounds after fio")
    probe.send_signal(signal.SIGTERM)
    assert probe.wait(timeout=WAIT_S) == 0

    store = Store(str(db))
    first, last = (value / 1e6 for value in query(db, "SELECT min(start_us), max(start_us) FROM samples")[0])
    slowdown = probe_slowdown(store, "disk", first, last + 1, 1.0)
    starts = np.array(slowdown["interval_starts"])
    for kind in ("read", "write"):
        medians = np.array(slowdown["kinds"][kind]["median"], dtype=float)
        quiet = np.nanmedian(medians[starts + 1 <= quiet_end])
        loud = np.nanmedian(medians[(starts >= quiet_end + 1) & (starts + 1 <= fio_end - 1)])
        assert loud >= 2 * quiet, (kind, quiet, loud)

    section = json.loads((job_dir / "traces" / "assessment.json").read_text())["file_system"]
    assert section["store"] == str(db) and section["problem"] is None
    [target] = section["targets"]
    assert target["used_by_job"] and {span["kind"] for span in target["slow_spans"]} >= {"read"}
    page = (job_dir / "traces" / "report.html").read_text()
    assert "The file system during this job" in page
    assert re.search(r"The file system was [\d.]+x slower than normal for reads from \d\d:\d\d:\d\d to "
                     r"\d\d:\d\d:\d\d; [\d.]+ % of this job's lost time", page), page[page.find("file-system"):][:3000]


def damaged_store(path):
    """A store whose tables hold what the probe never writes: a duration that is text."""
    from ioassess.site.probe.config import Target
    from ioassess.site.probe.store import Store
    store = Store(str(path), writable=True)
    target = store.target_id(Target("scratch", "/scratch", 1 << 20, 10), IO_DIRECT)
    store.db.execute("INSERT INTO samples VALUES (?, 0, ?, 'slow')", (target, int(time.time() * 1e6) - 10))
    store.close()


@pytest.mark.parametrize("store", [None, "garbage", "missing", "damaged"])
def test_a_job_report_without_a_usable_store_says_why_and_is_still_made(ioassess, tmp_path, store):
    env = {}
    if store:
        env["IOASSESS_PROBE_DB"] = str(tmp_path / "probe.sqlite")
        if store == "garbage":
            (tmp_path / "probe.sqlite").write_bytes(b"not a database, " * 100)
        if store == "damaged":
            damaged_store(tmp_path / "probe.sqlite")
    traces = tmp_path / "traces"
    result = ioassess("run", "--trace-dir", str(traces), "--", "dd", "if=/dev/zero", f"of={tmp_path}/out",
                      "bs=64k", "count=16", env=env)
    assert result.returncode == 0, result.stderr
    section = json.loads((traces / "assessment.json").read_text())["file_system"]
    assert section["targets"] == []
    expected = {None: "no probe store is configured: run `ioassess probe run`",
                "garbage": f"{tmp_path / 'probe.sqlite'}: not a probe store (file is not a database)",
                "missing": f"{tmp_path / 'probe.sqlite'}: no probe store there",
                "damaged": f"{tmp_path / 'probe.sqlite'}: not a probe store (invalid literal for int()"}[store]
    assert section["problem"].startswith(expected), section
    assert "The file system during this job" in (traces / "report.html").read_text()


def test_the_probe_store_is_the_one_given_else_the_environments_else_the_sites(tmp_path):
    from ioassess.site.probe.during_job import find_probe_db
    site = tmp_path / "epilog.conf"
    site.write_text("[epilog]\nprobe_db = /var/lib/ioassess/probe.sqlite\n")
    assert find_probe_db("given.sqlite", {"IOASSESS_PROBE_DB": "env.sqlite"}, str(site)) == "given.sqlite"
    assert find_probe_db(None, {"IOASSESS_PROBE_DB": "env.sqlite"}, str(site)) == "env.sqlite"
    assert find_probe_db(None, {}, str(site)) == "/var/lib/ioassess/probe.sqlite"
    assert find_probe_db(None, {}, str(tmp_path / "none.conf")) is None
    site.write_text("probe_db = x\n")   # not a settings file: the epilog says so; the report has no store
    assert find_probe_db(None, {}, str(site)) is None


def free_port():
    with socket.socket() as probe_socket:
        probe_socket.bind(("127.0.0.1", 0))
        return probe_socket.getsockname()[1]


def test_the_exporter_serves_last_durations_normals_and_slowdown_quantiles(start_ioassess, ioassess, tmp_path):
    from prometheus_client.parser import text_string_to_metric_families
    (tmp_path / "fs").mkdir()
    db, port = tmp_path / "probe.sqlite", free_port()
    probe = start_ioassess("probe", "run", "--dir", str(tmp_path / "fs"), "--db", str(db), "--interval", "0.05s",
                           "--data-size", "4M", "--pool-files", "10", "--metrics-port", str(port))

    def samples():
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
                text = response.read().decode()
        except OSError:
            return {}
        return {(family.name, tuple(sorted(sample.labels.items()))): sample.value
                for family in text_string_to_metric_families(text) for sample in family.samples}
    wait_for(lambda: sum(name == "ioassess_probe_slowdown" for name, _ in samples()) == 4 * len(OPS),
             "the slowdown quantiles of every op")
    exported = samples()
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
        exposition = response.read().decode()
    busy = ioassess("probe", "run", "--dir", str(tmp_path / "fs"), "--db", str(tmp_path / "other.sqlite"),
                    "--metrics-port", str(port))
    probe.send_signal(signal.SIGTERM)
    assert probe.wait(timeout=WAIT_S) == 0
    target = str(tmp_path / "fs")
    for op in OPS:
        assert exported["ioassess_probe_last_seconds", (("op", op), ("target", target))] > 0
        assert exported["ioassess_probe_normal_seconds", (("op", op), ("target", target))] > 0
        quantiles = [exported["ioassess_probe_slowdown", (("op", op), ("quantile", name), ("target", target))]
                     for name in ("median", "p90", "p95", "p99")]
        # a ratio to the target's own normal: its size is the machine's load (36 under stress-ng)
        assert quantiles == sorted(quantiles) and 0 < quantiles[0] and math.isfinite(quantiles[-1])
    assert (busy.returncode, busy.stderr) == (
        2, f"ioassess: --metrics-address 127.0.0.1 --metrics-port {port}: Address already in use\n")
    # The Grafana dashboard asks only for what the exporter serves.
    dashboard = (REPO / "contrib" / "probe" / "ioassess-probe-dashboard.json").read_text()
    asked = set(re.findall(r"ioassess_probe_\w+", dashboard))
    assert len(asked) == 4 and all(f"# HELP {name} " in exposition for name in asked), asked


def listening_addresses(port):
    """The addresses (IPv4, as in /proc/net/tcp: 0100007F is 127.0.0.1) a TCP socket listens on
    port at."""
    with open("/proc/net/tcp") as table:
        rows = [line.split() for line in table.readlines()[1:]]
    return {address for _, local, _, state, *_ in rows if state == "0A"
            for address, listening_port in [local.split(":")] if int(listening_port, 16) == port}


def threads_of(pid):
    with open(f"/proc/{pid}/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("Threads:"))


def sockets_of(pid):
    """The sockets among pid's open descriptors; a descriptor closed while they are read (the probe
    opens and closes its store every round) is not one."""
    targets = []
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            targets.append(os.readlink(f"/proc/{pid}/fd/{fd}"))
        except FileNotFoundError:
            pass
    return sum(target.startswith("socket:") for target in targets)


def children_of(pid):
    with open(f"/proc/{pid}/task/{pid}/children") as children:
        return [int(child) for child in children.read().split()]


IDLE_CONNECTIONS = 1000


def test_idle_connections_to_the_exporter_never_delay_a_round(start_ioassess, tmp_path):
    """1,000 connections that send nothing, opened and then closed all together: the exporter
    listens on 127.0.0.1 only, serves in a process of its own with one thread and at most
    MAX_CONNECTIONS of them open, still answers a scrape among them, and every round the probe
    was asked for is in the store in its own interval (a round that overran would have skipped
    the next one's). Before: a thread per connection in the probe's own process, 4,000
    connections 4,003 threads, and 11 of 20 rounds missed when they closed."""
    from ioassess.site.probe.metrics import MAX_CONNECTIONS
    (tmp_path / "fs").mkdir()
    db, port, rounds, interval = tmp_path / "probe.sqlite", free_port(), 30, 0.5
    probe = start_ioassess("probe", "run", "--dir", str(tmp_path / "fs"), "--db", str(db), "--interval", f"{interval}s",
                           "--data-size", "4M", "--pool-files", "10", "--metrics-port", str(port), "--rounds",
                           str(rounds))
    target = str(tmp_path / "fs")
    wait_for(lambda: rows_of(db, target) >= 3 * len(OPS), "three rounds")
    assert listening_addresses(port) == {"0100007F"}
    (server,) = children_of(probe.pid)
    threads = threads_of(probe.pid)
    limits = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(limits[0], min(limits[1], 4 * IDLE_CONNECTIONS)), limits[1]))
    idle = []
    try:
        idle += [socket.create_connection(("127.0.0.1", port), timeout=WAIT_S) for _ in range(IDLE_CONNECTIONS)]
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=WAIT_S) as response:
            assert b"# HELP ioassess_probe_last_seconds " in response.read()
        assert threads_of(probe.pid) == threads and threads_of(server) == 1
        assert sockets_of(probe.pid) == 0 and sockets_of(server) <= MAX_CONNECTIONS + 1   # and its listener
        wait_for(lambda: rows_of(db, target) >= rounds // 2 * len(OPS), "half the rounds")
    finally:
        for connection in idle:
            connection.close()
        resource.setrlimit(resource.RLIMIT_NOFILE, limits)
    _, stderr = probe.communicate(timeout=WAIT_S + rounds * interval)
    assert probe.returncode == 0 and stderr.splitlines()[-1] == f"ioassess probe: stopped after {rounds} rounds"
    starts = [start for (start,) in query(db, "SELECT start_us FROM samples WHERE op = 0 ORDER BY start_us")]
    assert [round((start - starts[0]) / 1e6 / interval) for start in starts] == list(range(rounds))


def test_the_exporter_listens_on_the_address_given(start_ioassess, ioassess, tmp_path):
    (tmp_path / "fs").mkdir()
    port = free_port()
    db = tmp_path / "probe.sqlite"
    common = ("probe", "run", "--dir", str(tmp_path / "fs"), "--db", str(db), "--data-size", "2M", "--pool-files", "5",
              "--metrics-port", str(port))
    probe = start_ioassess(*common, "--metrics-address", "0.0.0.0")
    wait_for(lambda: rows_of(db, str(tmp_path / "fs")) >= len(OPS), "a round")
    assert listening_addresses(port) == {"00000000"}
    probe.send_signal(signal.SIGTERM)
    assert probe.wait(timeout=WAIT_S) == 0
    nowhere = ioassess(*common, "--metrics-address", "example.org")   # a name: never looked up
    assert nowhere.returncode == 2 and nowhere.stderr.startswith(
        f"ioassess: --metrics-address example.org --metrics-port {port}: ") and \
        len(nowhere.stderr.splitlines()) == 1, nowhere.stderr


def test_the_example_settings_are_valid():
    from ioassess.site.probe.config import read_config
    settings = read_config(str(REPO / "contrib" / "probe" / "probe.conf"))
    assert [target.name for target in settings.targets] == ["scratch", "home"] and settings.metrics_port == 9464


def test_another_user_reads_the_store_while_the_probe_runs_and_after(start_ioassess, ioassess, job_user,
                                                                     installation_reachable, searchable_tmp):
    (searchable_tmp / "fs").mkdir()
    db = searchable_tmp / "probe.sqlite"
    out = searchable_tmp / "out"
    out.mkdir()
    os.chown(out, job_user.pw_uid, job_user.pw_gid)
    common = ("--dir", str(searchable_tmp / "fs"), "--db", str(db), "--data-size", "2M", "--pool-files", "5",
              "--interval", "0.05s")

    def report_as_user(name):
        return subprocess.run([sys.executable, "-m", "ioassess", "probe", "report", "--db", str(db), "--since", "1h",
                               "--json", str(out / name)], cwd=out, user=job_user.pw_uid, group=job_user.pw_gid,
                              extra_groups=[], capture_output=True, text=True, timeout=WAIT_S)
    probe = start_ioassess("probe", "run", *common)
    wait_for(lambda: rows_of(db, str(searchable_tmp / "fs")) >= 3 * len(OPS), "three rounds")
    assert oct(db.stat().st_mode & 0o777) == "0o644"
    running = report_as_user("running.json")
    probe.send_signal(signal.SIGTERM)
    assert probe.wait(timeout=WAIT_S) == 0
    after = report_as_user("after.json")
    for result, name in ((running, "running.json"), (after, "after.json")):
        assert result.returncode == 0, result.stderr
        [target] = json.loads((out / name).read_text())["targets"]
        assert target["ops"]["read_1MiB"]["overall"]["count"] >= 3


def test_a_full_store_disk_is_one_line_and_the_rounds_go_on(start_ioassess, tmp_path, mounts):
    store_fs = mounts("tmpfs", tmp_path / "store", ["size=2m"])
    (tmp_path / "fs").mkdir()
    db = store_fs / "probe.sqlite"
    probe = start_ioassess("probe", "run", "--dir", str(tmp_path / "fs"), "--db", str(db), "--data-size", "2M",
                           "--pool-files", "5", "--interval", "0.02s")

    def next_line():
        assert select.select([probe.stderr], [], [], WAIT_S)[0], "no line from the probe"
        return probe.stderr.readline().rstrip("\n")
    assert next_line().startswith("ioassess probe: probing ")
    wait_for(lambda: rows_of(db, str(tmp_path / "fs")) >= 2 * len(OPS), "two rounds")
    filler = os.open(store_fs / "filler", os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        while True:
            os.write(filler, b"\0" * 4096)
    except OSError:
        os.close(filler)
    assert next_line() == "ioassess probe: store: database or disk is full"
    os.unlink(store_fs / "filler")
    assert next_line() == "ioassess probe: store: probing again"
    stored = rows_of(db, str(tmp_path / "fs"))
    wait_for(lambda: rows_of(db, str(tmp_path / "fs")) >= stored + 2 * len(OPS), "rounds stored again")
    probe.send_signal(signal.SIGTERM)
    _, rest = probe.communicate(timeout=WAIT_S)
    assert probe.returncode == 0
    assert rest.splitlines()[-1].startswith("ioassess probe: stopped after "), rest
    assert not any(line.startswith("ioassess probe: store: ") for line in rest.splitlines()), rest


def test_a_job_outside_the_probes_samples_says_nothing_is_known_of_the_file_system(history, ioassess, tmp_path):
    """A store whose target has no sample in the job's window (the probe was not running then):
    the report says so for that target, draws no probe chart, and does not claim that the file
    system stayed as fast as normal."""
    store, _, _ = history
    result = ioassess("run", "--trace-dir", tmp_path / "t", "--", "sh", "-c", 'cat "$0" >/dev/null', __file__)
    assert result.returncode == 0, result.stderr
    result = ioassess("report", tmp_path / "t", "--probe-db", store.path, "-o", tmp_path / "r.html",
                      "--json", tmp_path / "a.json")
    assert result.returncode == 0, result.stderr
    (target,) = json.loads((tmp_path / "a.json").read_text())["file_system"]["targets"]
    assert not any(sum(kind["count"]) for kind in target["kinds"].values())
    page = (tmp_path / "r.html").read_text()
    assert "The probe has no sample of this target during the job" in page
    assert "stayed below" not in page and "slowdown (observed / normal)" not in page
