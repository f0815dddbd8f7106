"""The job report's "The file system during this job": the probe's slowdown over the job's
window, and the job's slow ops and lost time that fell in intervals where the probe was slow.

The store is the one named explicitly (`ioassess report --probe-db`), else $IOASSESS_PROBE_DB,
else `probe_db` in the site's settings (/etc/ioassess/epilog.conf, which the epilog reads).
Without one the section says how to get one; a store that cannot be read, or not within
store.READ_TIME_LIMIT_S, is a note in it, never the loss of the report. The store's directories
are matched against this host's mount table by name only: nothing at a path the store names is
looked at (a path could hang, or mount a file system).
"""
import math
import os


from ...files import mount_table, read_settings_file
from ...inputs.job import mount_index, mount_of
from .slowdown import SLOW_FACTOR, probe_slowdown, slow_spans
from .store import DAMAGED_STORE_ERRORS, Store, StoreError, not_a_store

PROBE_DB_ENV = "IOASSESS_PROBE_DB"
SITE_SETTINGS = "/etc/ioassess/epilog.conf"
HOW_TO_GET_ONE = ("no probe store is configured: run `ioassess probe run` on a node of its own or a shared login "
                  "node (docs/probe.md) and give its store with --probe-db, $IOASSESS_PROBE_DB or probe_db in "
                  "/etc/ioassess/epilog.conf")


def find_probe_db(explicit=None, environ=os.environ, site_settings=SITE_SETTINGS):
    """The probe store's path, or None: the one given, $IOASSESS_PROBE_DB, or probe_db in the
    site's settings (a settings file that cannot be read names none: the epilog says why)."""
    if explicit:
        return explicit
    if environ.get(PROBE_DB_ENV):
        return environ[PROBE_DB_ENV]
    if not os.path.isfile(site_settings):
        return None
    try:
        return read_settings_file(site_settings).get("epilog", "probe_db", fallback=None) or None
    except ValueError:
        return None


def file_system_during_job(probe_db, job_start_s, job_end_s, mount_points, file_names):
    """The section's data but the job's own ops in the slow spans (with_job_ops adds them).
    job_*_s: the job's window (s since the epoch); mount_points: those the inputs name for the
    job's files, file_names: the job's files whose mount point they do not name."""
    if not probe_db:
        return {"store": None, "problem": HOW_TO_GET_ONE, "targets": []}
    if not (math.isfinite(job_start_s) and math.isfinite(job_end_s) and job_end_s > job_start_s):
        return {"store": probe_db, "problem": "the job's start and end are not known", "targets": []}
    try:
        store = Store(probe_db)
        try:
            targets = _job_targets(store, job_mount_points(mount_points, file_names))
            # the automatic width: about 50 intervals, or whole hours for a job older than the raw rows
            slowdowns = [probe_slowdown(store, name, job_start_s, job_end_s) for name, _ in targets]
        finally:
            store.close()
    except StoreError as error:
        return {"store": probe_db, "problem": str(error), "targets": []}
    except DAMAGED_STORE_ERRORS as error:
        return {"store": probe_db, "problem": not_a_store(probe_db, error), "targets": []}
    return {"store": probe_db, "problem": None, "slow_factor": SLOW_FACTOR, "job_start": job_start_s,
            "targets": [{**slowdown, "used_by_job": used, "slow_spans": slow_spans(slowdown, SLOW_FACTOR)}
                        for (_, used), slowdown in zip(targets, slowdowns)]}


def slow_span_windows(section):
    """(start, end) in s since the epoch of each slow span of the section, in order."""
    return [(span["start"], span["end"]) for target in section["targets"] for span in target["slow_spans"]]


def with_job_ops(section, slow_ops, lost_s, total_lost_s):
    """The section with the job's own ops in each slow span (in slow_span_windows' order): its
    slow ops, its time lost and that time's share of the job's (total_lost_s)."""
    if section["problem"] is not None:
        return section
    spans = [span for target in section["targets"] for span in target["slow_spans"]]
    for span, ops, lost in zip(spans, slow_ops, lost_s):
        span["job_slow_ops"] = int(ops)
        span["job_lost_s"] = float(lost)
        span["job_lost_share"] = span["job_lost_s"] / total_lost_s if total_lost_s > 0 else None
    return {**section, "job_lost_s": total_lost_s}


def job_mount_points(known, file_names):
    """The mount points of the job's files: those its inputs name, and for the absolute file
    names they do not, this host's (the report is made where the job ran)."""
    table = mount_index(mount_table())
    directories = {os.path.dirname(name) for name in file_names if name.startswith("/")}
    return (set(known) | {mount_of(directory + "/", table)[0] for directory in directories}) - {""}


def _job_targets(store, mount_points):
    """[(name, whether the job used its file system)]: the targets on the job's file systems,
    or all of them when none is."""
    index = mount_index(mount_table())
    targets = [(name, mount_of(os.path.normpath(directory), index)[0] in mount_points)
               for name, (_, directory, _) in store.targets().items()]
    used = [entry for entry in targets if entry[1]]
    return used or targets
