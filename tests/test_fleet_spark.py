"""`ioassess fleet query --engine spark --master URL` on a real Spark standalone cluster
(tests/spark_cluster.py: a master and one worker on this machine; the store on the same file
system at the same path, as a site's shared one). The store is that of tests/test_fleet.py's
Spark test: real recorded jobs and a made-up fleet of 2,000 jobs over two months. Every answer
has DuckDB's rows, compared as tests/test_fleet.py compares them, and the executors that made it
ran on the worker (the master lists the application as completed; the worker's directory for
it holds an executor's log of the tasks it ran).

Each command line is a Spark application of its own (a driver JVM and an executor JVM start:
about 25 s on 2 cores), so two questions go through the command line (`top-lost` with filters,
and `job KEY`) and every question, with and without filters, through engine.connect(store,
"spark", master) in this process, one application for all."""
import datetime
import json
import subprocess
import sys

import pytest

from ioassess.site.fleet.engine import Filters, connect, run_query
from ioassess.site.fleet.queries import QUERIES
from ioassess.site.fleet.synthetic import SYNTHETIC_JOB_ID

from recorder_helpers import clean_env
from spark_cluster import spark_cluster_fixture  # noqa: F401 (the fixture spark_cluster)
from test_fleet import _close, mixed_store, recorded_jobs  # noqa: F401 (the fixture recorded_jobs)

pytestmark = pytest.mark.spark

APP_NAME = "ioassess fleet"   # engine.py's Spark application
JOB_KEY = str(SYNTHETIC_JOB_ID + 17)
WINDOW = datetime.datetime(2025, 12, 1, tzinfo=datetime.timezone.utc)
# (question, its arguments) through the command line
CLI_QUESTIONS = [("top-lost", "--until", WINDOW.isoformat(), "--fs", "/scratch"), ("job", JOB_KEY)]
# without filters (the rollups answer `findings` and `latency`) and with (every job's rows; `regressions` since)
FILTER_CASES = [Filters(), Filters(since=WINDOW, fs="/scratch")]


@pytest.fixture(scope="module")
def store(recorded_jobs, tmp_path_factory):  # noqa: F811 (the fixture imported above)
    path = tmp_path_factory.mktemp("fleet-store")
    mixed_store(path, recorded_jobs)
    return path


def _query_command(store, name, *args):
    """(column names, rows) of `ioassess fleet query NAME ARGS --format json`, run as a site runs it."""
    result = subprocess.run([sys.executable, "-m", "ioassess", "fleet", "query", name, *args, "--store", str(store),
                             "--format", "json"], cwd="/", env=clean_env(), capture_output=True, text=True,
                            timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    rows = json.loads(result.stdout)
    assert rows, (name, args)   # the store answers (and JSON rows name their columns)
    return list(rows[0]), [tuple(row.values()) for row in rows]


def _fleet_apps(cluster):
    return {app_id for app_id, name in cluster.completed_apps().items() if name == APP_NAME}


def _assert_ran_on_the_worker(cluster, app_ids):
    """The applications completed at the master, and an executor of each ran tasks on the worker."""
    cluster.wait_until(lambda: app_ids <= _fleet_apps(cluster), f"the master to list {sorted(app_ids)} as completed")
    for app_id in app_ids:
        assert any("Finished task" in log for log in cluster.executor_logs(app_id)), app_id


def test_the_command_line_on_a_standalone_cluster_gets_duckdbs_rows(store, spark_cluster):
    before = _fleet_apps(spark_cluster)
    for name, *args in CLI_QUESTIONS:
        expected_columns, expected = _query_command(store, name, *args, "--engine", "duckdb")
        columns, rows = _query_command(store, name, *args, "--engine", "spark", "--master", spark_cluster.master_url)
        assert columns == expected_columns, name
        assert rows == [tuple(_close(value) for value in row) for row in expected], name
    # one application per command line
    spark_cluster.wait_until(lambda: len(_fleet_apps(spark_cluster) - before) == len(CLI_QUESTIONS),
                             f"the master to list {len(CLI_QUESTIONS)} applications as completed")
    _assert_ran_on_the_worker(spark_cluster, _fleet_apps(spark_cluster) - before)


def _spark_on(store, master_url):
    """engine.connect's Spark on the cluster, although this process may already have a session of
    its own in local mode (tests/test_fleet.py's): connect ends that one."""
    engine = connect(str(store), "spark", master_url)
    assert engine.session.sparkContext.master == master_url
    return engine


def test_every_named_question_on_a_standalone_cluster_gets_duckdbs_rows(store, spark_cluster):
    duckdb, spark = connect(str(store)), _spark_on(store, spark_cluster.master_url)
    app_id = spark.session.sparkContext.applicationId
    try:
        for name, query in QUERIES.items():
            for filters in FILTER_CASES:
                argument = JOB_KEY if query.takes_argument else None
                expected_columns, expected = run_query(duckdb, name, filters, argument)
                columns, rows = run_query(spark, name, filters, argument)
                assert columns == expected_columns, name
                assert rows == [tuple(_close(value) for value in row) for row in expected], (name, filters)
                assert rows or name in ("regressions", "outliers"), (name, filters)   # the store answers
    finally:
        spark.session.stop()   # the worker's one core, free for the next application
    _assert_ran_on_the_worker(spark_cluster, {app_id})
