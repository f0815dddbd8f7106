"""The job end under a real Slurm (tests/slurm.py: Debian's munged, slurmctld and slurmd on this
machine): jobs of two users, submitted with sbatch as each user, recorded through the Lmod module
loaded in their batch scripts by Debian's Lmod, each get their report from the real Epilog
(contrib/slurm/epilog.sh) where the settings say, readable by their user only; and their fleet
records reach the store through `ioassess fleet compact` run as a batch job of root's, as a
scrontab entry runs it (docs/epilog.md, "Compaction on a schedule").

The jobs are waited for by their state (squeue lists none of them), looked at every
slurm.POLL_S and bounded by JOBS_WAIT_S; no sleep stands in for a state. A job stays listed,
COMPLETING, until its Epilog has ended, so by then its report is there or never will be.
"""
import json
import os
import stat

import pytest

from recorder_helpers import TEST_USER, system_user
from slurm import installed_command, slurm_cluster_fixture  # noqa: F401 (the fixture slurm_cluster)

pytestmark = [pytest.mark.root, pytest.mark.slow]

SECOND_USER = "ioassess-test2"
JOBS_PER_USER = 10
JOBS_WAIT_S = 600        # for 20 jobs and their Epilogs on a loaded machine of 2 cores

BATCH_SCRIPT = """\
#!/bin/bash -l
# A user's job: the site's module, then a program that writes a file and reads it back.
module use {modules}
module load ioassess || exit 1
dd if=/dev/zero of=data-$SLURM_JOB_ID bs=64k count=16 conv=fsync status=none || exit 1
cat data-$SLURM_JOB_ID > /dev/null
"""

# What a scrontab entry of the site runs (docs/epilog.md, "Compaction on a schedule").
COMPACT_SCRIPT = """\
#!/bin/sh
exec {ioassess} fleet compact --store {store}
"""


@pytest.fixture(scope="module")
def job_users():
    return [system_user(TEST_USER), system_user(SECOND_USER)]


def work_dir(cluster, user):
    return cluster.work / user.pw_name


def report_path(cluster, user, job_id, suffix="html"):
    """Where the settings (output = %w/ioassess-%j.html) put a job's report: %w is the directory
    the job was submitted from."""
    return work_dir(cluster, user) / f"ioassess-{job_id}.{suffix}"


def make_work_dir(cluster, user):
    """The user's directory of batch scripts and data; others may search it, so that only a
    report's own mode keeps them out of it."""
    directory = work_dir(cluster, user)
    directory.mkdir()
    os.chown(directory, user.pw_uid, user.pw_gid)
    script = directory / "job.sh"
    script.write_text(BATCH_SCRIPT.format(modules=cluster.modules))
    os.chown(script, user.pw_uid, user.pw_gid)
    return script


@pytest.fixture(scope="module")
def ended_jobs(slurm_cluster, job_users):
    """{job id: user} of JOBS_PER_USER jobs of each user, submitted in turns, once squeue lists
    none of them: a job is listed (COMPLETING) until its Epilog has ended, so each report that
    will ever be written is there by then."""
    scripts = {user.pw_name: make_work_dir(slurm_cluster, user) for user in job_users}
    jobs = {}
    for _ in range(JOBS_PER_USER):
        for user in job_users:
            script = scripts[user.pw_name]
            jobs[slurm_cluster.sbatch(script, user=user, cwd=script.parent)] = user
    slurm_cluster.wait_until(lambda: not set(slurm_cluster.queue()) & set(jobs),
                             f"{len(jobs)} jobs and their Epilogs to end", JOBS_WAIT_S)
    return jobs


def job_output(directory, job_id):
    """What the batch job printed (sbatch's default output file, in the directory it was submitted from)."""
    path = directory / f"slurm-{job_id}.out"
    return path.read_text(errors="replace") if path.exists() else f"(no {path})"


def epilog_lines(cluster, job_id, user):
    prefix = f"job {job_id} ({user.pw_name}): "
    return [line.split(prefix, 1)[1] for line in cluster.epilog_log.read_text().splitlines() if prefix in line]


def test_every_job_ends_and_gets_its_report_from_the_epilog(slurm_cluster, ended_jobs):
    assert len(ended_jobs) == 2 * JOBS_PER_USER
    for job_id, user in ended_jobs.items():
        state = slurm_cluster.job(job_id)
        assert (state["JobState"], state["ExitCode"]) == ("COMPLETED", "0:0"), \
            f"job {job_id}: {state}\n{job_output(work_dir(slurm_cluster, user), job_id)}"
        traces = list((slurm_cluster.trace_root / user.pw_name / job_id).glob(f"ioassess_{job_id}_*.iot"))
        assert traces, f"job {job_id}: the module's recorder wrote no trace"
        report = report_path(slurm_cluster, user, job_id)
        lines = epilog_lines(slurm_cluster, job_id, user)
        assert report.exists(), f"job {job_id}: no report {report}; the epilog's lines: {lines}"
        assert lines == [f"wrote {report} and {report_path(slurm_cluster, user, job_id, 'json')}; fleet record spooled"]
        for path in (report, report_path(slurm_cluster, user, job_id, "json")):
            status = os.stat(path)
            assert (status.st_uid, stat.S_IMODE(status.st_mode)) == (user.pw_uid, 0o600), path
        assessment = json.loads(report_path(slurm_cluster, user, job_id, "json").read_text())
        assert f"data-{job_id}" in json.dumps(assessment), f"job {job_id}: dd's file is not in its assessment"


def read_as(cluster, user, path):
    return cluster.command("cat", path, user=user, check=False)


def test_each_report_is_readable_by_its_user_only(slurm_cluster, ended_jobs, job_users):
    for job_id, user in ended_jobs.items():
        (other,) = [someone for someone in job_users if someone.pw_uid != user.pw_uid]
        report = report_path(slurm_cluster, user, job_id)
        own = read_as(slurm_cluster, user, report)
        assert own.returncode == 0 and "<html" in own.stdout, own.stderr
        refused = read_as(slurm_cluster, other, report)
        assert refused.returncode != 0 and "Permission denied" in refused.stderr, \
            f"{other.pw_name} read {report}: {refused}"


def test_a_compaction_run_as_a_batch_job_puts_each_job_in_the_store_once(slurm_cluster, ended_jobs):
    script = slurm_cluster.base / "compact.sh"
    script.write_text(COMPACT_SCRIPT.format(ioassess=installed_command(), store=slurm_cluster.fleet_store))
    os.chmod(script, 0o700)
    compaction = slurm_cluster.sbatch(script, cwd=slurm_cluster.base)
    slurm_cluster.wait_until(lambda: compaction not in slurm_cluster.queue(), "the compaction job to end",
                             JOBS_WAIT_S)
    state = slurm_cluster.job(compaction)
    assert (state["JobState"], state["ExitCode"]) == ("COMPLETED", "0:0"), \
        f"{state}\n{job_output(slurm_cluster.base, compaction)}"

    query = slurm_cluster.command(installed_command(), "fleet", "sql", "SELECT job_id, user FROM jobs",
                                  "--store", slurm_cluster.fleet_store, "--format", "json")
    rows = json.loads(query.stdout)
    assert sorted((row["job_id"], row["user"]) for row in rows) == \
        sorted((job_id, user.pw_name) for job_id, user in ended_jobs.items())
    assert not list((slurm_cluster.fleet_store / "spool").glob("*.json")), "the compaction left records in the spool"
