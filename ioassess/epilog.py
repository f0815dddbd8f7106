"""`ioassess epilog`: a job's report at its end, run by Slurm's Epilog (as root, on every node of
the job) or TaskEpilog (as the job's user, after every task). Settings and layout: docs/epilog.md.

The process Slurm starts (the parent) reads the site's settings and the job's facts from the
environment, decides whether this node makes the report, and starts the worker,
`python -m ioassess.epilog`, as the job's user (supplementary groups, then group, then user),
which checks its own ids before it opens anything. Only the worker touches the job's files: it
finds the traces and the Darshan log, checks where the report goes and writes it. The parent
waits at most the time limit, kills the worker's process group past it, logs one line per
outcome and exits 0 whatever happened: Slurm drains a node whose Epilog fails.
"""
import argparse
import configparser
import dataclasses
import datetime
import json
import os
import pwd
import re
import signal
import socket
import stat
import subprocess
import sys

from .models.modelfile import DEFAULT_MODEL

DEFAULT_CONFIG = "/etc/ioassess/epilog.conf"
CONFIG_SECTION = "epilog"
NODES = ("first", "all")
# After SIGKILL, how long the parent waits for the worker to be gone; a worker stuck in the
# kernel (a hung file system) cannot die, and is left behind rather than holding up the node.
REAP_GRACE_S = 5.0
PLACEHOLDER = re.compile(r"%(.?)")
PLACEHOLDERS = "%j job id, %u user name, %U uid, %h node, %w job's working directory, %H home, %% a %"


class EpilogError(Exception):
    """Something that ends this run of the epilog; str() is the one line logged."""


@dataclasses.dataclass
class Settings:
    """The site's settings: built in, then the config file, then the command line."""
    trace_dir: str = "/tmp/ioassess-%U"
    darshan_logpath: str = ""
    darshan_days: int = 2
    output: str = "%w/ioassess-%j.html"
    json: str = ""
    model: str = DEFAULT_MODEL
    nodes: str = "first"
    time_limit: float = 60.0
    log: str = ""


@dataclasses.dataclass(frozen=True)
class JobContext:
    """The ending job as Slurm describes it, and the identity its worker runs with."""
    job_id: str
    user: str
    uid: int
    gid: int
    groups: tuple
    home: str
    work_dir: str
    host: str


@dataclasses.dataclass
class Work:
    """What the worker does, sent to it as JSON on its standard input."""
    job_id: str
    user: str
    uid: int
    gid: int
    groups: list
    trace_dir: str
    darshan_logpath: str
    darshan_days: int
    output: str
    json: str
    model: str


def _days(text):
    if not text.strip().isdigit():
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number of days (0 or more)")
    return int(text)


def _seconds(text):
    try:
        seconds = float(text)
    except ValueError:
        seconds = 0.0
    if not seconds > 0 or seconds == float("inf"):
        raise argparse.ArgumentTypeError(f"{text!r} is not a time limit in seconds (more than 0)")
    return seconds


def _nodes(text):
    if text not in NODES:
        raise argparse.ArgumentTypeError(f"{text!r} is not one of {', '.join(NODES)}")
    return text


CONVERTERS = {"darshan_days": _days, "time_limit": _seconds, "nodes": _nodes}


def add_options(parser):
    """The options of `ioassess epilog`: one per setting, plus --config."""
    defaults = Settings()

    def option(*names, help, **kwargs):
        parser.add_argument(*names, help=help.replace("%", "%%"), **kwargs)   # argparse formats help with %

    option("--config", metavar="FILE",
           help=f"the site's settings, section [{CONFIG_SECTION}] (default: {DEFAULT_CONFIG} if it exists)")
    option("--trace-dir", metavar="TEMPLATE",
           help=f"where the job's traces are (default: {defaults.trace_dir}); {PLACEHOLDERS}")
    option("--darshan-logpath", metavar="DIR",
           help="the root of Darshan's log directories (YEAR/MONTH/DAY/); default: none, no Darshan log")
    option("--darshan-days", metavar="N", type=_days,
           help=f"look for the Darshan log in the day directories from today back N days "
                f"(default: {defaults.darshan_days})")
    option("-o", "--output", metavar="TEMPLATE", help=f"the report (default: {defaults.output})")
    option("--json", metavar="TEMPLATE", help="also write the assessment as JSON here (default: not)")
    option("--model", metavar="NAME|PATH", help=f"the cause model (default: {defaults.model})")
    option("--nodes", type=_nodes, metavar="|".join(NODES),
           help="make the report on the first node of the job only, or on every node (default: first)")
    option("--time-limit", metavar="SECONDS", type=_seconds,
           help=f"stop the report after this long (default: {defaults.time_limit:g})")
    option("--log", metavar="FILE", help="also append the lines said to this file (default: stderr only)")


def run(args):
    """`ioassess epilog`: always returns 0 (docs/epilog.md, "Exit status")."""
    log = EpilogLog(sys.stderr)
    try:
        settings = load_settings(args)
        if settings.log:
            log.open(settings.log)
        if not reports_here(os.environ, settings):
            return 0
        job = job_context(os.environ)
        log.prefix = f"job {job.job_id} ({job.user}): "
        for line in run_worker(job, work_for(job, settings), settings.time_limit):
            log.line(line)
    except EpilogError as error:
        log.line(str(error))
    except Exception as error:   # a bug must not drain the node: it is one line in the log too
        log.line(f"internal error: {type(error).__name__}: {error}")
    return 0


class EpilogLog:
    """One line per outcome, on stderr and appended to the site's log file when there is one."""

    def __init__(self, stream):
        self.stream = stream
        self.fd = None
        self.prefix = ""

    def open(self, path):
        try:
            self.fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o640)
        except OSError as error:
            self.line(f"{path}: cannot open the log: {error.strerror}; logging on stderr only")

    def line(self, message):
        now = datetime.datetime.now().isoformat(timespec="seconds")
        text = f"{now} {socket.gethostname()} ioassess epilog[{os.getpid()}]: {self.prefix}{' '.join(message.split())}\n"
        # A log that cannot be written (stderr closed, disk full) must not fail the epilog either.
        try:
            self.stream.write(text)
            self.stream.flush()
        except OSError:
            pass
        if self.fd is not None:
            try:
                os.write(self.fd, text.encode("utf-8", "backslashreplace"))
            except OSError:
                pass


def load_settings(args):
    settings = Settings()
    config = args.config or (DEFAULT_CONFIG if os.path.exists(DEFAULT_CONFIG) else None)
    if config:
        settings = dataclasses.replace(settings, **read_config(config))
    given = {field.name: getattr(args, field.name) for field in dataclasses.fields(Settings)}
    return dataclasses.replace(settings, **{name: value for name, value in given.items() if value is not None})


def read_config(path):
    """The settings in a config file: `name = value` lines under [epilog] (no % interpolation:
    the templates use %)."""
    parser = configparser.ConfigParser(interpolation=None)
    try:
        with open(path, encoding="utf-8") as f:
            parser.read_file(f)
    except OSError as error:
        raise EpilogError(f"{path}: cannot read the settings: {error.strerror}") from None
    except configparser.Error as error:
        raise EpilogError(f"{path}: not a settings file: {error}") from None
    if parser.sections() != [CONFIG_SECTION]:
        raise EpilogError(f"{path}: needs exactly one section, [{CONFIG_SECTION}]; found {parser.sections()}")
    names = [field.name for field in dataclasses.fields(Settings)]
    values = {}
    for name, text in parser[CONFIG_SECTION].items():
        if name not in names:
            raise EpilogError(f"{path}: unknown setting {name!r} (known: {', '.join(names)})")
        try:
            values[name] = CONVERTERS.get(name, str)(text)
        except argparse.ArgumentTypeError as error:
            raise EpilogError(f"{path}: {name}: {error}") from None
    return values


def reports_here(environ, settings):
    """Whether this run makes the job's report: under TaskEpilog (which has SLURM_PROCID) task 0
    of each step, wherever it ran; under the Epilog, which every node of the job runs, the first
    node of the job's node list, unless nodes = all."""
    if "SLURM_PROCID" in environ:
        return environ["SLURM_PROCID"] == "0"
    node = environ.get("SLURMD_NODENAME")
    nodelist = environ.get("SLURM_JOB_NODELIST") or environ.get("SLURM_NODELIST")
    return settings.nodes == "all" or not (node and nodelist) or first_host(nodelist) == node


def first_host(nodelist):
    """The first host of a Slurm hostlist expression: "n[08-11,14],gpu3" -> "n08",
    "rack[2-3]-n[1-4]" -> "rack2-n1"."""
    depth = 0
    for end, char in enumerate(nodelist):
        depth += {"[": 1, "]": -1}.get(char, 0)
        if char == "," and depth == 0:
            nodelist = nodelist[:end]
            break
    return re.sub(r"\[([^],-]*)[^]]*\]", r"\1", nodelist)


def job_context(environ):
    """The job from Slurm's variables (SLURM_JOB_ID, SLURM_JOB_UID, SLURM_JOB_USER,
    SLURM_JOB_GID, SLURM_JOB_WORK_DIR, SLURMD_NODENAME) and the passwd entry of its user."""
    job_id = environ.get("SLURM_JOB_ID", "")
    if not job_id.isdigit():
        raise EpilogError(f"SLURM_JOB_ID is {job_id!r}, not a job id: run me from Slurm's Epilog or TaskEpilog")
    uid_text = environ.get("SLURM_JOB_UID", "" if os.geteuid() == 0 else str(os.geteuid()))
    if not uid_text.isdigit():
        raise EpilogError(f"job {job_id}: SLURM_JOB_UID is {uid_text!r}, not a uid")
    try:
        entry = pwd.getpwuid(int(uid_text))
    except KeyError:
        raise EpilogError(f"job {job_id}: uid {uid_text} has no passwd entry") from None
    named = environ.get("SLURM_JOB_USER")
    if named and named != entry.pw_name:
        raise EpilogError(f"job {job_id}: SLURM_JOB_USER is {named}, but uid {uid_text} is {entry.pw_name}")
    gid, groups = _identity(job_id, entry, environ.get("SLURM_JOB_GID", ""))
    host = environ.get("SLURMD_NODENAME") or socket.gethostname().split(".")[0]
    return JobContext(job_id=job_id, user=entry.pw_name, uid=entry.pw_uid, gid=gid, groups=groups,
                      home=entry.pw_dir, work_dir=environ.get("SLURM_JOB_WORK_DIR") or entry.pw_dir, host=host)


def _identity(job_id, entry, gid_text):
    """(gid, supplementary groups) the worker runs with: as root, the job's group (SLURM_JOB_GID,
    else the user's) and the user's groups; as the job's user (TaskEpilog), its own."""
    if os.geteuid() == 0:
        gid = int(gid_text) if gid_text.isdigit() else entry.pw_gid
        return gid, tuple(sorted(set(os.getgrouplist(entry.pw_name, gid))))
    if os.geteuid() != entry.pw_uid:
        raise EpilogError(f"job {job_id}: running as uid {os.geteuid()}, neither root nor the job's user "
                          f"{entry.pw_name} (uid {entry.pw_uid})")
    return os.getegid(), tuple(sorted(set(os.getgroups())))


def expand(template, job):
    """A template with its placeholders (PLACEHOLDERS) replaced; the result must be absolute."""
    values = {"j": job.job_id, "u": job.user, "U": str(job.uid), "h": job.host, "w": job.work_dir,
              "H": job.home, "%": "%"}

    def value(match):
        if match.group(1) not in values:
            raise EpilogError(f"{template}: unknown placeholder %{match.group(1)} (known: {PLACEHOLDERS})")
        return values[match.group(1)]

    path = PLACEHOLDER.sub(value, template)
    if not os.path.isabs(path):
        raise EpilogError(f"{template}: gives {path}, not an absolute path")
    return path


def work_for(job, settings):
    if not settings.output:
        raise EpilogError("output is empty: the settings must say where the report goes")
    return Work(job_id=job.job_id, user=job.user, uid=job.uid, gid=job.gid, groups=list(job.groups),
                trace_dir=expand(settings.trace_dir, job), darshan_logpath=settings.darshan_logpath,
                darshan_days=settings.darshan_days, output=expand(settings.output, job),
                json=expand(settings.json, job) if settings.json else "", model=settings.model)


def run_worker(job, work, time_limit):
    """Run the worker as the job's user, at most time_limit seconds; its lines, or the line
    saying why there are none."""
    options = {}
    if os.geteuid() == 0:
        # subprocess sets the supplementary groups, then the group, then the user (real,
        # effective and saved), in the child before it runs Python.
        options = {"user": work.uid, "group": work.gid, "extra_groups": work.groups}
    try:
        worker = subprocess.Popen([sys.executable, "-m", "ioassess.epilog"], cwd="/", env=_worker_environment(job),
                                  umask=0o077, start_new_session=True, stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **options)
    except OSError as error:
        raise EpilogError(f"{sys.executable}: cannot start the report process: {error.strerror}") from None
    try:
        out, err = worker.communicate(json.dumps(dataclasses.asdict(work)), timeout=time_limit)
    except subprocess.TimeoutExpired:
        return [_stop(worker, time_limit)]
    lines = out.splitlines()
    if worker.returncode != 0:
        last = err.strip().splitlines()[-1:] or ["no message"]
        lines.append(f"the report process failed (exit status {worker.returncode}): {last[0]}")
    return lines


def _worker_environment(job):
    """A small, fixed environment: none of the job's variables, no LD_PRELOAD (no recorder or
    Darshan in the epilog); PYTHONPATH as the epilog's, so that the worker imports the same
    ioassess; PYTHONSAFEPATH so that the working directory is not searched for modules."""
    environment = {"PATH": "/usr/bin:/bin", "PYTHONSAFEPATH": "1", "LANG": "C.UTF-8", "USER": job.user,
                   "LOGNAME": job.user, "HOME": job.home}
    if os.environ.get("PYTHONPATH"):
        environment["PYTHONPATH"] = os.environ["PYTHONPATH"]
    return environment


def _stop(worker, time_limit):
    try:
        os.killpg(worker.pid, signal.SIGKILL)   # the worker and every process it started
    except ProcessLookupError:
        pass
    stopped = f"the report took longer than the time limit of {time_limit:g} s and was stopped"
    try:
        worker.communicate(timeout=REAP_GRACE_S)
    except subprocess.TimeoutExpired:
        return f"{stopped}; its process {worker.pid} did not end after SIGKILL (stuck in a file system?) and was left"
    return f"{stopped}: no report written"


# ---- the worker: runs as the job's user ----

def worker_main():
    """The worker: the Work as JSON on stdin, one line per outcome on stdout."""
    from .load import LoadError
    from .models.modelfile import ModelFileError
    try:
        work = Work(**json.load(sys.stdin))
        check_identity(work)
        lines = make_job_report(work)
    except (EpilogError, LoadError, ModelFileError) as error:
        lines = [str(error)]
    except Exception as error:   # the parent logs one line; a traceback would not fit the log
        lines = [f"internal error: {type(error).__name__}: {error}"]
    print("\n".join(lines), flush=True)
    return 0


def check_identity(work):
    """Refuse to go on unless every uid and gid is the job's, the groups are the job's, and
    root cannot be had back."""
    have = (os.getresuid(), os.getresgid(), sorted(set(os.getgroups())))
    want = ((work.uid,) * 3, (work.gid,) * 3, sorted(set(work.groups)))
    if have != want:
        raise EpilogError(f"not running as the job's user: (uids, gids, groups) are {have}, not {want}")
    if work.uid == 0:
        return
    try:
        os.setuid(0)
    except PermissionError:
        return
    raise EpilogError("root could be had back after dropping to the job's user: refusing to go on")


def make_job_report(work):
    """Find the job's traces and Darshan log and write its report; the lines to log."""
    from .report import make_report
    traces = job_trace_files(work.trace_dir, work.job_id)
    darshan_logs = (job_darshan_logs(work.darshan_logpath, work.user, work.job_id, work.darshan_days)
                    if work.darshan_logpath else [])
    if not traces and not darshan_logs:
        where = f"no trace {os.path.join(work.trace_dir, f'ioassess_{work.job_id}_*.iot')}"
        if work.darshan_logpath:
            where += (f" and no Darshan log {work.darshan_logpath}/YEAR/MONTH/DAY/"
                      f"{work.user}_*_id{work.job_id}_*.darshan of the last {work.darshan_days + 1} days")
        return [f"nothing to report: {where}"]
    destinations = [path for path in (work.output, work.json) if path]
    for path in destinations:
        check_destination(path, work.uid)
    try:
        assessment = make_report(traces + darshan_logs[:1], work.model, work.output, work.json or None)
    except OSError as error:
        raise EpilogError(f"{work.output}: cannot write the report: {error.strerror}") from None
    bad_traces = [note for note in assessment["job"]["notes"] if note.split(": ", 1)[0] in traces]
    more_logs = ([f"{len(darshan_logs)} Darshan logs of this job: assessed the largest, {darshan_logs[0]}"]
                 if len(darshan_logs) > 1 else [])
    grid = assessment.get("site_grid") or {}
    bad_grid = [f"site grid not used: {grid['path']}: {grid['problem']}"] if grid.get("problem") else []
    return more_logs + bad_traces + bad_grid + [f"wrote {' and '.join(destinations)}"]


def job_trace_files(trace_dir, job_id):
    """The job's traces in trace_dir: regular files ioassess_<job id>_*.iot (the recorder names
    them by the job id in their header), sorted."""
    try:
        entries = list(os.scandir(trace_dir))
    except FileNotFoundError:
        return []
    except OSError as error:
        raise EpilogError(f"{trace_dir}: cannot list the traces: {error.strerror}") from None
    prefix = f"ioassess_{job_id}_"
    return sorted(entry.path for entry in entries
                  if entry.name.startswith(prefix) and entry.name.endswith(".iot") and entry.is_file())


def job_darshan_logs(logpath, user, job_id, days, today=None):
    """The job's Darshan logs, largest first. Darshan writes LOGPATH/<year>/<month>/<day>/
    <user>_<exe>_id<job id>_<month>-<day>-<seconds>-<hash>.darshan, dated by the job's start in
    local time, without leading zeros; the day directories from today back `days` days are
    searched, newest first, and the first that holds any of the job's logs ends the search."""
    today = today or datetime.date.today()
    for back in range(days + 1):
        day = today - datetime.timedelta(days=back)
        directory = os.path.join(logpath, str(day.year), str(day.month), str(day.day))
        try:
            entries = list(os.scandir(directory))
        except FileNotFoundError:
            continue
        except OSError as error:
            raise EpilogError(f"{directory}: cannot list the Darshan logs: {error.strerror}") from None
        found = [entry for entry in entries if entry.name.startswith(f"{user}_") and entry.is_file()
                 and f"_id{job_id}_" in entry.name and entry.name.endswith(".darshan")]
        if found:
            return [entry.path for entry in sorted(found, key=lambda entry: -entry.stat().st_size)]
    return []


def check_destination(path, uid):
    """Refuse a report path that is a symbolic link, or whose directory is one or belongs to
    another user than the job's or root: a link, or a directory someone else controls, could
    send the job's report over a file of their choosing. A missing directory is created (0700)."""
    directory = os.path.dirname(path)
    try:
        os.makedirs(directory, exist_ok=True)
        status = os.lstat(directory)
    except OSError as error:
        raise EpilogError(f"{directory}: cannot create the report's directory: {error.strerror}") from None
    if stat.S_ISLNK(status.st_mode):
        raise EpilogError(f"{directory}: is a symbolic link: not followed, no report written")
    if status.st_uid not in (uid, 0):
        raise EpilogError(f"{directory}: belongs to uid {status.st_uid}, neither the job's user nor root: "
                          "no report written")
    try:
        status = os.lstat(path)
    except FileNotFoundError:
        return
    if stat.S_ISLNK(status.st_mode):
        raise EpilogError(f"{path}: is a symbolic link: not followed, left as it is; no report written")
    if not stat.S_ISREG(status.st_mode):
        raise EpilogError(f"{path}: exists and is not a regular file: no report written")


if __name__ == "__main__":
    sys.exit(worker_main())
