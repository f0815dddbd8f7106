"""The site's store (ioassess/site/fleet, docs/fleet.md): records of real recorded jobs spooled,
compacted into Parquet and questioned; compaction killed or stopped at every step it can die
at; hostile spool files; back-filling from Darshan logs."""
import datetime
import glob
import json
import os
import shutil
import signal
import subprocess
import sys

import numpy as np
import pyarrow.parquet as pq
import pytest

from ioassess.inputs.darshan_log import read_darshan_log
from ioassess.inputs.darshan_util import DarshanLogError
from ioassess.inputs.job import DIRECTIONS, LAYERS
from ioassess.inputs.load import load_job
from ioassess.report import make_report
from ioassess.report.latency import LATENCY_SCALE
from ioassess.site.fleet.engine import Filters, connect, run_query
from ioassess.site.fleet.history import app_history
from ioassess.site.fleet.queries import HISTORY_RUNS, PERCENTILES, QUERIES
from ioassess.site.fleet.record import job_record, keyed
from ioassess.site.fleet.record import record_hash
from ioassess.site.fleet.schema import COLUMNS, FLOAT, INTEGER, STORE_TABLES
from ioassess.site.fleet.spool import MAX_RECORD_BYTES, SPOOL, spool_record
from ioassess.site.fleet.store import MERGE_PARTS, SIGNAL_AT_ENV, compact

from recorder_helpers import clean_env, shipped_darshan_logs

# (user, program and its arguments): jobs of two users and three applications
JOBS = [("alice", ["dd", "if=/dev/zero", "of={dir}/a", "bs=64k", "count=300"]),
        ("alice", ["dd", "if=/dev/zero", "of={dir}/b", "bs=4k", "count=2000"]),
        ("bob", ["cp", "{dir}/a", "{dir}/c"]),
        ("bob", ["cat", "{dir}/b", "{dir}/a"])]


@pytest.fixture(scope="module")
def recorded_jobs(tmp_path_factory):
    """[(user, trace dir, assessment)] of the JOBS run under the recorder."""
    base = tmp_path_factory.mktemp("fleet-jobs")
    jobs = []
    for number, (user, argv) in enumerate(JOBS):
        trace_dir = base / f"t{number}"
        command = [a.format(dir=base) for a in argv]
        result = subprocess.run([sys.executable, "-m", "ioassess", "run", "--trace-dir", str(trace_dir), "--",
                                 *command], cwd="/", env=clean_env(), capture_output=True, text=True, timeout=300)
        assert result.returncode == 0, result.stderr
        with open(trace_dir / "assessment.json") as f:
            jobs.append((user, trace_dir, json.load(f)))
    return jobs


def _records(recorded_jobs):
    return [job_record(assessment, user=user, source=str(trace_dir)) for user, trace_dir, assessment in recorded_jobs]


def _spool_all(store, records):
    for record in records:
        spool_record(str(store), record)


def _stored_jobs(store):
    return sorted(row["job_key"] for path in glob.glob(f"{store}/jobs/month=*/part-*.parquet")
                  for row in pq.read_table(path, columns=["job_key"]).to_pylist())


def test_a_jobs_record_keeps_its_assessments_numbers(recorded_jobs):
    # runs outside a scheduler: each its own key, however alike (two dd runs may share a second)
    assert len({record["job"]["job_key"] for record in _records(recorded_jobs)}) == len(JOBS)
    user, trace_dir, assessment = recorded_jobs[0]
    record = job_record(assessment, user=user, source=str(trace_dir))
    job, head = record["job"], assessment["headline"]
    assert (job["io_s"], job["lost_low_s"], job["lost_high_s"]) == (head["io_s"], head["lost_low_s"],
                                                                     head["lost_high_s"])
    assert job["app"] == "dd" and job["user"] == "alice" and job["job_key"].startswith("run-")
    assert record["findings"]["title"] == [f["title"] for f in assessment["recommendations"]]
    histograms = assessment["latency"]["histograms"]
    assert sum(record["latency"]["count"]) == sum(h["ops"] for h in histograms)
    assert job["posix_write_bytes"] == 300 * 65536
    # the same assessment gives the same record and hash; another user another hash
    assert job_record(assessment, user=user, source=str(trace_dir)) == record
    assert job_record(assessment, user="carol", source=str(trace_dir))["job"]["record_hash"] != job["record_hash"]


def test_the_named_questions_answer_from_the_jobs_records(recorded_jobs, tmp_path):
    records = _records(recorded_jobs)
    _spool_all(tmp_path, records)
    assert compact(str(tmp_path)) == {"added": 4, "duplicates": 0, "rejected": 0, "merged": 0}
    assert os.listdir(tmp_path / SPOOL) == []
    connection = connect(str(tmp_path))

    columns, rows = run_query(connection, "top-lost")
    lost = [r["job"]["lost_high_s"] for r in records]
    assert [row[columns.index("lost_high_s")] for row in rows] == sorted(lost, reverse=True)

    columns, rows = run_query(connection, "by-user")
    by_user = {row[0]: dict(zip(columns, row)) for row in rows}
    assert by_user["alice"]["jobs"] == 2 and by_user["bob"]["jobs"] == 2
    assert by_user["alice"]["lost_high_s"] == pytest.approx(sum(lost[:2]))
    columns, rows = run_query(connection, "by-app", Filters(user="bob"))
    assert sorted(row[0] for row in rows) == ["cat", "cp"]

    columns, rows = run_query(connection, "findings")
    fired = {}
    for record in records:
        for code, title in zip(record["findings"]["code"], record["findings"]["title"]):
            fired[code or title] = fired.get(code or title, 0) + 1
    assert {row[0]: row[columns.index("fired")] for row in rows} == fired
    # from the rollups (no filter) and from every job's rows (a filter all jobs pass): the same
    every_job = Filters(since=datetime.datetime(2000, 1, 1, tzinfo=datetime.timezone.utc))
    assert run_query(connection, "findings", every_job) == (columns, [tuple(_close(v) for v in row) for row in rows])

    columns, rows = run_query(connection, "job", argument=records[1]["job"]["job_key"])
    assert len(rows) == 1 and rows[0][columns.index("app_runs")] == 2   # the two dd runs

    # every named question runs on the store
    for name, query in QUERIES.items():
        run_query(connection, name, Filters(), records[0]["job"]["job_key"] if query.takes_argument else None)


def _close(value):
    """A float as pytest.approx (sums in another order round otherwise), anything else as it is."""
    return pytest.approx(value, rel=1e-12) if isinstance(value, float) else value


def test_fleet_percentiles_are_those_of_every_jobs_ops_together(recorded_jobs, tmp_path):
    """The latency question's percentiles are the bins of the pooled ops' exact percentiles:
    histograms summed, not percentiles of percentiles."""
    _spool_all(tmp_path, _records(recorded_jobs))
    compact(str(tmp_path))
    connection = connect(str(tmp_path))
    columns, rows = run_query(connection, "latency")
    # from the rollups (no filter) and from every job's rows (a filter all jobs pass): the same
    since = Filters(since=datetime.datetime(2000, 1, 1, tzinfo=datetime.timezone.utc))
    assert run_query(connection, "latency", since) == (columns, rows)
    pooled = {}
    io_layers = [LAYERS.index("posix"), LAYERS.index("stdio")]
    for _, trace_dir, _ in recorded_jobs:
        job = load_job([str(trace_dir)])
        ops = job.ops
        chosen = np.isin(ops["layer"], io_layers)
        for i in np.flatnonzero(chosen):
            f = job.files[ops["file"][i]]
            pooled.setdefault((DIRECTIONS[ops["direction"][i]], f.mount_point, f.fs_type), []).append(
                ops["duration_s"][i])
    assert {tuple(row[:3]) for row in rows} == set(pooled)
    for row in rows:
        durations = np.sort(pooled[tuple(row[:3])])
        assert row[columns.index("ops")] == len(durations)
        for q in PERCENTILES:
            exact = durations[int(np.floor(q * (len(durations) - 1)))]
            name = f"p{str(q)[2:].ljust(2, '0')}_s"
            assert row[columns.index(name)] == pytest.approx(
                float(LATENCY_SCALE.seconds_of(LATENCY_SCALE.bins_of(exact))), rel=1e-9), (row[:3], q)


def _compaction(store, env=None):
    """`ioassess fleet compact` in a process of its own (a CompletedProcess)."""
    return subprocess.run([sys.executable, "-m", "ioassess", "fleet", "compact", "--store", str(store)], cwd="/",
                          env=clean_env(env), capture_output=True, text=True, timeout=300)


STEPS = [("part renamed", n) for n in range(1, 2 * len(STORE_TABLES) + 1)] + \
    [("spool record removed", n) for n in (1, 3, 4)]


@pytest.mark.parametrize("step,count", STEPS, ids=[f"{s.replace(' ', '-')}-{n}" for s, n in STEPS])
def test_a_compaction_killed_at_any_step_loses_and_duplicates_nothing(recorded_jobs, tmp_path, step, count):
    records = _records(recorded_jobs)
    # two months: a batch commits a month at a time
    records[3]["job"]["month"] = "2026-10"
    records[3]["job"]["record_hash"] = record_hash(records[3])
    _spool_all(tmp_path, records)
    killed = _compaction(tmp_path, {SIGNAL_AT_ENV: f"{step}:{count}:SIGKILL"})
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    finished = _compaction(tmp_path)
    assert finished.returncode == 0, finished.stderr
    assert _stored_jobs(tmp_path) == sorted(r["job"]["job_key"] for r in records)
    assert os.listdir(tmp_path / SPOOL) == []
    connection = connect(str(tmp_path))
    latency_rows = connection.run("SELECT count(*) FROM latency")[1][0][0]
    finding_rows = connection.run("SELECT count(*) FROM findings")[1][0][0]
    assert latency_rows == sum(len(r["latency"]["bin"]) for r in records)
    assert finding_rows == sum(len(r["findings"]["title"]) for r in records)
    # spooled again (a job end retried): nothing added twice
    _spool_all(tmp_path, records)
    assert compact(str(tmp_path))["duplicates"] == 4 and _stored_jobs(tmp_path) == sorted(
        r["job"]["job_key"] for r in records)


MERGE_STEPS = [("part renamed", len(STORE_TABLES) + 1), ("part renamed", 2 * len(STORE_TABLES)),
               ("merged part removed", 1), ("merged part removed", 5),
               ("merged part removed", (MERGE_PARTS + 1) * len(STORE_TABLES))]


@pytest.mark.parametrize("step,count", MERGE_STEPS, ids=[f"{s.replace(' ', '-')}-{n}" for s, n in MERGE_STEPS])
def test_a_merge_killed_half_way_leaves_each_row_once(recorded_jobs, tmp_path, step, count):
    records = _records(recorded_jobs)
    for n in range(MERGE_PARTS + 1):   # one part per compaction: more than a merge waits for
        record = json.loads(json.dumps(records[n % 4]))
        record["job"]["job_key"] = f"{1000 + n}"
        record["job"]["record_hash"] = record_hash(record)
        spool_record(str(tmp_path), record)
        if n < MERGE_PARTS:
            assert compact(str(tmp_path), merge_parts=10 ** 6)["added"] == 1
    killed = _compaction(tmp_path, {SIGNAL_AT_ENV: f"{step}:{count}:SIGKILL"})
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    assert _compaction(tmp_path).returncode == 0
    assert _stored_jobs(tmp_path) == sorted(str(1000 + n) for n in range(MERGE_PARTS + 1))
    assert len(glob.glob(f"{tmp_path}/jobs/month=*/part-*.parquet")) == 1
    connection = connect(str(tmp_path))
    assert connection.run("SELECT count(*) FROM latency")[1][0][0] == sum(
        len(records[n % 4]["latency"]["bin"]) for n in range(MERGE_PARTS + 1))


def test_a_second_compaction_while_one_runs_leaves_the_spool_to_it(recorded_jobs, tmp_path, start_ioassess):
    _spool_all(tmp_path, _records(recorded_jobs))
    first = start_ioassess("fleet", "compact", "--store", tmp_path, env={SIGNAL_AT_ENV: "lock held:1:SIGSTOP"})
    _, status = os.waitpid(first.pid, os.WUNTRACED)
    assert os.WIFSTOPPED(status)
    second = _compaction(tmp_path)
    assert second.returncode == 0 and "another compaction holds the store" in second.stderr
    assert len(os.listdir(tmp_path / SPOOL)) == 4
    os.kill(first.pid, signal.SIGCONT)
    _, err = first.communicate(timeout=300)
    assert first.returncode == 0, err
    assert len(_stored_jobs(tmp_path)) == 4


def test_hostile_spool_files_are_rejected_one_line_each_and_the_rest_taken(recorded_jobs, tmp_path):
    records = _records(recorded_jobs)
    _spool_all(tmp_path, records[:2])
    spool = tmp_path / SPOOL
    good_name = os.listdir(spool)[0]
    bad = {
        "x-" + "0" * 64 + ".json": b"{not json",
        "y-" + "1" * 64 + ".json": json.dumps({"job": {}, "findings": {}, "files": {}, "latency": {}}).encode(),
        "notarecord.txt": b"hello",
        "z-" + "2" * 64 + ".json": b"[" * 100000,
        "v-" + "4" * 64 + ".json": b" " * (MAX_RECORD_BYTES + 1),
    }
    for name, data in bad.items():
        (spool / name).write_bytes(data)
    os.symlink(spool / good_name, spool / ("w-" + "3" * 64 + ".json"))
    wrong_type = json.loads(json.dumps(records[2]))
    wrong_type["job"]["io_s"] = "a lot"
    wrong_type["job"]["record_hash"] = record_hash(wrong_type)
    with pytest.raises(ValueError, match="io_s: 'a lot' is not a float"):
        spool_record(str(tmp_path), wrong_type)
    wrong_name = f"{wrong_type['job']['job_key']}-{wrong_type['job']['record_hash']}.json"
    (spool / wrong_name).write_text(json.dumps(wrong_type))
    counts = compact(str(tmp_path))
    assert counts["added"] == 2 and counts["rejected"] == 7, counts
    rejects = pq.read_table(glob.glob(f"{tmp_path}/rejects/part-*.parquet")[0]).to_pylist()
    assert all(r["problem"] and "\n" not in r["problem"] and len(r["problem"]) <= 300 for r in rejects)
    problems = {r["source"]: r["problem"] for r in rejects}
    assert "io_s: 'a lot' is not a float" in problems[f"{SPOOL}/{wrong_name}"]
    assert "nested too deeply" in problems[f"{SPOOL}/z-{'2' * 64}.json"]
    assert "larger than" in problems[f"{SPOOL}/v-{'4' * 64}.json"]
    assert "cannot open" in problems[f"{SPOOL}/w-{'3' * 64}.json"]
    assert sorted(os.listdir(tmp_path / "rejected")) == sorted(r["source"].split("/", 1)[1] for r in rejects)
    assert os.listdir(spool) == []


def test_the_command_line_says_what_is_wrong_in_one_line(ioassess, tmp_path, recorded_jobs):
    result = ioassess("fleet", "query", "top-lost", "--store", tmp_path / "none")
    assert result.returncode == 2 and result.stderr.count("\n") == 1 and "no such store" in result.stderr
    result = ioassess("fleet", "query", "top-lost")
    assert result.returncode == 2 and "--store" in result.stderr
    result = ioassess("fleet", "query", "job", "--store", tmp_path)
    assert result.returncode == 2 and "job key" in result.stderr
    result = ioassess("fleet", "sql", "SELECT nonsense FROM jobs", "--store", tmp_path)
    assert result.returncode == 2 and result.stderr.count("\n") == 1
    _spool_all(tmp_path, _records(recorded_jobs))
    assert ioassess("fleet", "compact", "--store", tmp_path).returncode == 0
    result = ioassess("fleet", "query", "by-user", "--store", tmp_path, "--format", "json")
    assert result.returncode == 0, result.stderr
    assert {row["user"]: row["jobs"] for row in json.loads(result.stdout)} == {"alice": 2, "bob": 2}
    result = ioassess("fleet", "query", "top-lost", "--store", tmp_path, "--format", "csv", "--app", "dd")
    assert result.returncode == 0 and len(result.stdout.splitlines()) == 3
    # a user's names with control characters reach no terminal as they are
    hostile = _records(recorded_jobs)[0]
    hostile["job"].update(app="app\x1b]0;title\x07", user="eve\x1b[2J\nx")
    spool_record(str(tmp_path), keyed(hostile))
    assert ioassess("fleet", "compact", "--store", tmp_path).returncode == 0
    for form in ("table", "csv"):
        result = ioassess("fleet", "query", "top-lost", "--store", tmp_path, "--format", form, "--user",
                          "eve\x1b[2J\nx")
        assert result.returncode == 0 and "\\x1b]0;title\\x07" in result.stdout and "\x1b" not in result.stdout


def _logs_to_ingest(base):
    """A DARSHAN_LOGPATH-like tree of four shipped logs, a truncated one and one darshan-util
    aborts on (test_darshan_log.py): (root, good logs, damaged logs)."""
    logs = base / "logs" / "2020" / "4" / "21"
    logs.mkdir(parents=True)
    good = [logs / os.path.basename(path) for path in shipped_darshan_logs()[:4]]
    for path, copy in zip(shipped_darshan_logs(), good):
        shutil.copy(path, copy)
    truncated, aborting = logs / "damaged.darshan", logs / "names-damaged.darshan"
    truncated.write_bytes(good[0].read_bytes()[:300])
    data = bytearray(open(next(p for p in shipped_darshan_logs() if p.endswith("/noposix.darshan")), "rb").read())
    data[9634] = 0x55
    aborting.write_bytes(bytes(data))
    return base / "logs", good, [truncated, aborting]


def _ingest(store, root, env=None):
    """`ioassess fleet ingest` in a process of its own; its workers end with it (the output's
    pipes close only when every process holding them has ended)."""
    return subprocess.run([sys.executable, "-m", "ioassess", "fleet", "ingest", "--store", str(store), str(root)],
                          cwd="/", env=clean_env(env), capture_output=True, text=True, timeout=600)


def assert_ingested_as_reported(store, logs):
    """Each log's row in the store has the numbers of its `ioassess report`'s record."""
    columns, rows = connect(str(store)).run("SELECT * FROM jobs")
    stored = {row["source"]: row for row in (dict(zip(columns, values)) for values in rows)}
    numbers = [name for name, kind in COLUMNS["jobs"] if kind in (INTEGER, FLOAT)]
    assert sorted(stored) == sorted(map(str, logs))
    for path in logs:
        expected = job_record(make_report([str(path)]), source=str(path))["job"]
        assert {name: stored[str(path)][name] for name in numbers} == {name: expected[name] for name in numbers}


def _stored_rejects(store):
    return sorted((row["source"], row["problem"]) for path in glob.glob(f"{store}/rejects/part-*.parquet")
                  for row in pq.read_table(path).to_pylist())


def test_ingest_takes_darshan_logs_skips_what_it_has_and_rejects_the_damaged(tmp_path):
    """Each log's row has the numbers of its `ioassess report`; a damaged log is one reject in
    report's words, also the one darshan-util aborts the worker reading it on."""
    root, good, damaged = _logs_to_ingest(tmp_path)
    store = tmp_path / "store"
    result = _ingest(store, root)
    assert result.returncode == 0, result.stderr
    assert "inputs 6: skipped 0" in result.stderr and "added 4" in result.stderr and "rejected 2" in result.stderr
    problems = []
    for path in damaged:
        with pytest.raises(DarshanLogError) as error:
            read_darshan_log(str(path))
        problems.append((str(path), str(error.value)))
    assert _stored_rejects(store) == sorted(problems)
    assert "SIGABRT" in dict(problems)[str(damaged[1])]
    assert_ingested_as_reported(store, good)
    again = _ingest(store, root)
    assert again.returncode == 0 and "skipped 6" in again.stderr and "added 0" in again.stderr
    assert len(_stored_jobs(store)) == 4


INGEST_STOPS = [("record spooled", 2, "SIGKILL"), ("rejects added", 1, "SIGKILL"), ("input taken", 2, "SIGKILL"),
                ("input taken", 3, "SIGSEGV")]


@pytest.mark.parametrize("step,count,signal_name", INGEST_STOPS,
                         ids=[f"{s.replace(' ', '-')}-{n}-{name}" for s, n, name in INGEST_STOPS])
def test_an_ingest_killed_at_any_point_loses_and_duplicates_nothing(tmp_path, step, count, signal_name):
    """Ingest itself killed after spooling a record or adding the rejects, then run again; or
    every worker killed at its Nth input (each is replaced, and the input taken up again):
    every log once in the store, a job or a reject, as an ingest that was never stopped."""
    root, good, damaged = _logs_to_ingest(tmp_path)
    store = tmp_path / "store"
    stopped = _ingest(store, root, {SIGNAL_AT_ENV: f"{step}:{count}:{signal_name}"})
    if step == "input taken":
        assert stopped.returncode == 0, stopped.stderr
    else:
        assert stopped.returncode == -signal.SIGKILL, stopped.stderr
        assert _ingest(store, root).returncode == 0
    connection = connect(str(store))
    assert sorted(connection.run("SELECT source FROM jobs")[1]) == sorted((str(path),) for path in good)
    assert [source for source, _ in _stored_rejects(store)] == sorted(map(str, damaged))


def test_an_input_whose_worker_dies_twice_is_a_reject_saying_so(tmp_path):
    """Every worker killed at its first input (as the kernel's OOM killer would): each input is
    taken up once more by a fresh worker, which dies too, and is then a reject saying how."""
    root, good, damaged = _logs_to_ingest(tmp_path)
    store = tmp_path / "store"
    result = _ingest(store, root, {SIGNAL_AT_ENV: "input taken:1:SIGKILL"})
    assert result.returncode == 0 and "added 0, rejected 6" in result.stderr, result.stderr
    assert _stored_rejects(store) == sorted((str(path), "the process assessing it died twice (killed by SIGKILL)")
                                            for path in good + damaged)


def test_a_run_that_loses_far_more_than_its_applications_history_is_a_regression(recorded_jobs, tmp_path):
    """Twelve runs of one application (real records with their times and losses set): the
    eleventh, ten times its history's loss, is a regression and an outlier; the others are not."""
    base = _records(recorded_jobs)[0]
    lost = [10.0, 11.0, 9.0, 10.5, 9.5, 10.0, 12.0, 8.0, 10.0, 11.0, 100.0, 10.0]
    for number, seconds in enumerate(lost):
        record = json.loads(json.dumps(base))
        job = record["job"]
        job.update(job_id=str(5000 + number), lost_high_s=seconds, lost_low_s=seconds, month="2023-11",
                   end=(1_700_000_000 + 3600 * number) * 10 ** 6)
        spool_record(str(tmp_path), keyed(record))
    compact(str(tmp_path))
    connection = connect(str(tmp_path))
    columns, rows = run_query(connection, "regressions")
    assert [row[0] for row in rows] == ["5010"]
    assert rows[0][columns.index("history_median")] == pytest.approx(10.0)
    columns, rows = run_query(connection, "outliers")
    assert [row[0] for row in rows] == ["5010"]
    columns, rows = run_query(connection, "job", argument="5010")
    assert rows[0][columns.index("rank_by_lost")] == 1 and rows[0][columns.index("app_runs")] == 12


def test_a_runs_history_at_job_end_follows_the_regressions_rule(recorded_jobs, tmp_path):
    """The twelve runs above, each judged at its end against the runs before it (as the epilog
    asks for a job's report): the runs counted, their median and rank as numpy has them, and a
    regression exactly where the `regressions` question finds one."""
    base = _records(recorded_jobs)[0]
    lost = [10.0, 11.0, 9.0, 10.5, 9.5, 10.0, 12.0, 8.0, 10.0, 11.0, 100.0, 10.0]
    ends = [datetime.datetime.fromtimestamp(1_700_000_000 + 3600 * n, datetime.timezone.utc) for n in range(12)]
    for number, (seconds, end) in enumerate(zip(lost, ends)):
        record = json.loads(json.dumps(base))
        record["job"].update(job_id=str(5000 + number), app="solver", lost_high_s=seconds, month="2023-11",
                             end=round(end.timestamp() * 1e6))
        spool_record(str(tmp_path), keyed(record))
    compact(str(tmp_path))
    regressions = {row[0] for row in run_query(connect(str(tmp_path)), "regressions")[1]}
    assert regressions == {"5010"}
    for number, (seconds, end) in enumerate(zip(lost, ends)):
        prior = lost[max(0, number - HISTORY_RUNS):number]
        history = app_history(str(tmp_path), "solver", end, seconds)
        assert (history["runs"], history["rank"]) == (len(prior), 1 + sum(p > seconds for p in prior))
        assert history["median_lost_s"] == (pytest.approx(np.median(prior)) if prior else None)
        assert history["regression"] == (str(5000 + number) in regressions)
    unknown = app_history(str(tmp_path), "never-ran", ends[-1], 1.0)
    assert (unknown["runs"], unknown["median_lost_s"], unknown["rank"], unknown["regression"]) == (0, None, 1, False)
    assert app_history(str(tmp_path), "", ends[-1], 1.0) is None


def mixed_store(store, recorded_jobs):
    """The recorded jobs' records compacted into store, and a made-up fleet of 2,000 jobs over
    two months (November and December 2025) added."""
    from ioassess.site.fleet.synthetic import add_synthetic_fleet
    _spool_all(store, _records(recorded_jobs))
    compact(str(store))
    add_synthetic_fleet(str(store), 2000, seed=3, first_month=(2025, 11), months=2)


@pytest.mark.spark
def test_every_named_question_gets_the_same_rows_from_duckdb_and_spark(recorded_jobs, tmp_path):
    """A store of real recorded jobs and a made-up fleet of 2,000 jobs over two months; every
    question without filters, with filters, and `job`, on both engines."""
    from ioassess.site.fleet.synthetic import SYNTHETIC_JOB_ID
    mixed_store(tmp_path, recorded_jobs)
    duckdb, spark = connect(str(tmp_path)), connect(str(tmp_path), "spark", "local[2]")
    window = datetime.datetime(2025, 12, 1, tzinfo=datetime.timezone.utc)
    cases = [Filters(), Filters(since=window), Filters(user="user0001"), Filters(app="app000"), Filters(fs="/home"),
             Filters(until=window, fs="/scratch")]
    for name, query in QUERIES.items():
        for filters in cases:
            argument = str(SYNTHETIC_JOB_ID + 17) if query.takes_argument else None
            expected_columns, expected = run_query(duckdb, name, filters, argument)
            columns, rows = run_query(spark, name, filters, argument)
            assert columns == expected_columns, name
            assert rows == [tuple(_close(value) for value in row) for row in expected], (name, filters)
            assert rows or name in ("regressions", "outliers"), (name, filters)   # the store answers
