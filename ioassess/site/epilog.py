"""`ioassess epilog`: a job's report at its end, run by Slurm's Epilog (as root, on every node of
the job) or TaskEpilog (as the job's user, after every task). Settings and layout: docs/epilog.md.

The process Slurm starts (the parent) reads the site's settings and the job's facts from the
environment, decides whether this node makes the report, and starts the worker, an isolated
`python -I` running worker_main, as the job's user (supplementary groups, then group, then
user), which checks its own ids before it opens anything. Only the worker touches the job's
files: it finds the traces and the Darshan log, checks them and where the report goes, writes
the report, and sends its outcome on a pipe of its own. The parent, child subreaper of
everything the worker starts (and with the worker in a cgroup of its own where one can be
made), waits at most the time limit, ends every process the worker left, logs exactly one line
and exits 0 whatever happened: Slurm drains a node whose Epilog fails.
"""
import argparse
import ctypes
import dataclasses
import datetime
import errno
import grp
import itertools
import json
import math
import os
import pwd
import re
import select
import signal
import socket
import stat
import subprocess
import sys
import syslog
import time

from ..escape import printable
from ..files import read_settings_file
from ..inputs.tracepack import PACK_SUFFIX
from ..jsonfile import Invalid, parse_json
from ..units import bytes_text, count_text

from ..models.modelfile import SITE_MODELS_DIR, SITE_MODELS_ENV, model_dirs, site_model_dir
from .iomodels import parse_size

DEFAULT_CONFIG = "/etc/ioassess/epilog.conf"
CONFIG_SECTION = "epilog"
NODES = ("first", "all")
# After SIGKILL, how long the parent waits for the worker to be gone; a worker stuck in the
# kernel (a hung file system) cannot die, and is left behind rather than holding up the node.
REAP_GRACE_S = 5.0
# How often the parent checks whether the worker has ended while it reads its output.
EXIT_POLL_S = 0.05
# What the parent keeps of the worker's result and of its output (stdout and stderr), in bytes;
# the rest is read and discarded.
RESULT_LIMIT = 256 * 1024
QUESTION_LIMIT = 16 * 1024
OUTPUT_TAIL = 4096
# The longest line the epilog logs, in characters.
LOG_LINE_LIMIT = 2000
PR_SET_CHILD_SUBREAPER = 36   # <linux/prctl.h>
# The epilog's variables its worker gets (report.schema.CHECK_SCHEMA_ENV, named here so that the
# epilog does not import the report before it needs it).
PASSED_TO_WORKER = ("IOASSESS_CHECK_SCHEMA",)
# The worker's program, run by `python -I -c`: argv[1] the directory ioassess is imported from
# (put first, as PYTHONPATH would be, when it is not on the isolated interpreter's path, as for
# an installation on PYTHONPATH), argv[2] the file descriptor of its result.
WORKER_BOOTSTRAP = ("import sys\n"
                    "if sys.argv[1] not in sys.path:\n"
                    "    sys.path.insert(0, sys.argv[1])\n"
                    "from ioassess.site.epilog import worker_main\n"
                    "sys.exit(worker_main(int(sys.argv[2]), int(sys.argv[3])))\n")
PACKAGE_PARENT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # of ioassess/site/
PLACEHOLDER = re.compile(r"%(.?)")
PLACEHOLDERS = "%j job id, %u user name, %U uid, %h node, %w job's working directory, %H home, %% a %"
# The most nodes a job's node list may name (the per-node layout expands it).
MAX_NODES = 1 << 20
# How often the reporting node looks for the packs still missing (one listing of the pack
# directory each time).
PACK_POLL_S = 0.2


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
    model: str = ""          # "": the one whose provenance fits the job (docs/cause-models.md)
    site_models: str = ""    # "": $IOASSESS_SITE_MODELS, else SITE_MODELS_DIR
    nodes: str = "first"
    time_limit: float = 60.0
    memory_limit: int = 4 << 30   # bytes; 0: none
    log: str = ""
    report_group: str = ""
    probe_db: str = ""
    fleet_store: str = ""    # "": no record of the job for the site's store (docs/fleet.md)
    pack_dir: str = ""       # "": traces are read where they are; else each node packs its traces here
    pack_wait: float = 30.0  # how long the reporting node waits for the other nodes' packs


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
    model_dirs: list         # [origin, directory] in search order (modelfile.model_dirs)
    report_group: str
    probe_db: str
    fleet_record: bool       # send the job's record for the site's store back with the outcome
    history: bool            # ask for the application's history in the site's store (the parent reads it)
    report: bool = True      # make the report (False: a node of the per-node layout that only packs)
    pack: str = ""           # the per-node layout: this node's pack, where its traces go first
    packs: list = dataclasses.field(default_factory=list)   # [node, pack] of every node to report on
    pack_wait: float = 0.0   # seconds to wait for the packs that are not there yet


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


CONVERTERS = {"darshan_days": _days, "time_limit": _seconds, "nodes": _nodes, "memory_limit": parse_size,
              "pack_wait": _seconds}


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
    option("--model", metavar="NAME|PATH",
           help="the cause model (default: the one whose provenance fits the job best, from the user's model "
                "directory, the site's and the shipped ones)")
    option("--site-models", metavar="DIR",
           help=f"the site's model directory, where `ioassess calibrate --site` writes (default: ${SITE_MODELS_ENV}, "
                f"else {SITE_MODELS_DIR})")
    option("--nodes", type=_nodes, metavar="|".join(NODES),
           help="make the report on the first node of the job only, or on every node (default: first)")
    option("--time-limit", metavar="SECONDS", type=_seconds,
           help=f"stop the report after this long (default: {defaults.time_limit:g})")
    option("--memory-limit", metavar="SIZE", type=parse_size,
           help=f"stop the report when it needs more memory than this, e.g. 4G; 0: no limit (default: "
                f"{bytes_text(defaults.memory_limit)})")
    option("--log", metavar="FILE",
           help="also append the lines said to this file, if it is a regular file of root's (default: stderr only)")
    option("--report-group", metavar="GROUP",
           help="make the reports readable by this group (mode 0640) when the job's user is in it "
                "(default: none, mode 0600)")
    option("--probe-db", metavar="PATH",
           help="the file-system probe's store (ioassess probe run), for the file system's slowdown during the job "
                "(default: none)")
    option("--fleet-store", metavar="DIR",
           help="spool the job's record into this site store (ioassess fleet, docs/fleet.md; default: none)")
    option("--pack-dir", metavar="TEMPLATE",
           help="the per-node layout: every node packs the job's traces of its trace directory (node-local) into "
                f"one file here, ioassess_<job id>_<node>{PACK_SUFFIX}, and the report is made of the packs "
                f"(default: none); {PLACEHOLDERS}")
    option("--pack-wait", metavar="SECONDS", type=_seconds,
           help=f"how long the reporting node waits for the other nodes' packs (default: {defaults.pack_wait:g}); "
                "less than the time limit")


def run(args):
    """`ioassess epilog`: always returns 0 (docs/epilog.md, "Exit status")."""
    log = EpilogLog(sys.stderr)
    try:
        settings = load_settings(args)
        if settings.log:
            log.open(settings.log)
        reporting = reports_here(os.environ, settings)
        if settings.pack_dir and "SLURM_PROCID" in os.environ and reporting:
            raise EpilogError("pack_dir is set: the per-node layout needs Slurm's Epilog, not the TaskEpilog (other "
                              "tasks of the node may still be writing their traces)")
        if not reporting and (not settings.pack_dir or "SLURM_PROCID" in os.environ):
            return 0
        job = job_context(os.environ)
        log.prefix = f"job {job.job_id} ({job.user}): "
        history = (lambda question: answer_history(settings.fleet_store, question)) if settings.fleet_store else None
        work = work_for(job, settings, reporting, report_nodes(os.environ, settings, job.host) if reporting else [])
        line, record = run_worker(job, work, settings.time_limit, settings.memory_limit, history)
        if settings.fleet_store and record is not None:
            line += spool_job_record(settings.fleet_store, record, job)
        log.line(line)
    except EpilogError as error:
        log.line(str(error))
    except Exception as error:   # a bug must not drain the node: it is one line in the log too
        log.line(f"internal error: {type(error).__name__}: {error}")
    return 0


class EpilogLog:
    """One line per outcome, on stderr and appended to the site's log file when it is a safe
    one (log_file_problem), else sent to syslog. Every line is printed with its control
    characters escaped and is at most LOG_LINE_LIMIT characters long."""

    def __init__(self, stream):
        self.stream = stream
        self.fd = None
        self.to_syslog = False
        self.prefix = ""

    def open(self, path):
        """Open the log without following a link and without blocking (a FIFO would block a
        writer until someone reads it), and keep it only if it is safe to append root's lines to."""
        flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
        try:
            fd = os.open(path, flags, 0o640)
        except OSError as error:
            # A FIFO with no reader, or a socket: ENXIO where a blocking open would wait.
            return self._refuse(path, "not a regular file (a FIFO or socket)" if error.errno == errno.ENXIO
                                else error.strerror)
        problem = log_file_problem(os.fstat(fd), os.geteuid())
        if problem:
            os.close(fd)
            return self._refuse(path, problem)
        self.fd = fd

    def _refuse(self, path, problem):
        self.to_syslog = True
        syslog.openlog("ioassess-epilog", syslog.LOG_PID, syslog.LOG_DAEMON)
        self.line(f"{path}: not used as the log: {problem}; the lines go to syslog and stderr")

    def line(self, message):
        message = bounded(printable(self.prefix + message), LOG_LINE_LIMIT)
        now = datetime.datetime.now().isoformat(timespec="seconds")
        text = f"{now} {socket.gethostname()} ioassess epilog[{os.getpid()}]: {message}\n"
        # A log that cannot be written (stderr closed, disk full) must not fail the epilog either.
        try:
            self.stream.write(text)
            self.stream.flush()
        except OSError:
            pass
        if self.to_syslog:
            syslog.syslog(syslog.LOG_NOTICE, message)
        if self.fd is not None:
            try:
                os.write(self.fd, text.encode("utf-8", "backslashreplace"))
            except OSError:
                pass


def log_file_problem(status, euid):
    """Why an opened log file must not receive the epilog's lines, or None. It must be a regular
    file with one link, owned by root or by the epilog's own user (TaskEpilog): a file another
    user owns, or a hard link to a file of root's elsewhere, would get root's lines."""
    if not stat.S_ISREG(status.st_mode):
        return "not a regular file"
    if status.st_uid not in (0, euid):
        return f"belongs to uid {status.st_uid}, not root" + ("" if euid == 0 else f" or uid {euid}")
    if status.st_nlink != 1:
        return f"has {status.st_nlink} hard links"
    return None


def bounded(text, limit):
    """text cut to at most limit characters, saying how much was cut."""
    if len(text) <= limit:
        return text
    cut = f"... ({len(text) - limit} more characters)"
    return text[:limit - len(cut)] + cut


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
    try:
        parser = read_settings_file(path)
    except ValueError as error:
        raise EpilogError(str(error)) from None
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


def configured_site_models(config=DEFAULT_CONFIG):
    """The site_models setting of the site's config file, or "" when it names none or cannot be
    read (the epilog itself says what is wrong with it)."""
    try:
        return read_config(config).get("site_models", "") if os.path.exists(config) else ""
    except EpilogError:
        return ""


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


def work_for(job, settings, report=True, nodes=()):
    """The worker's Work. With pack_dir (the per-node layout), it packs this node's traces and,
    when it reports, reads the packs of `nodes` (report_nodes)."""
    if not settings.output:
        raise EpilogError("output is empty: the settings must say where the report goes")
    packing = {}
    if settings.pack_dir:
        if settings.pack_wait >= settings.time_limit:
            raise EpilogError(f"pack_wait ({settings.pack_wait:g} s) must be less than time_limit "
                              f"({settings.time_limit:g} s): the report is made after the wait")
        pack_dir = expand(settings.pack_dir, job)
        packing = {"pack": os.path.join(pack_dir, pack_name(job.job_id, job.host)), "pack_wait": settings.pack_wait,
                   "packs": [[node, os.path.join(pack_dir, pack_name(job.job_id, node))] for node in nodes]}
    return Work(job_id=job.job_id, user=job.user, uid=job.uid, gid=job.gid, groups=list(job.groups),
                trace_dir=expand(settings.trace_dir, job), darshan_logpath=settings.darshan_logpath,
                darshan_days=settings.darshan_days, output=expand(settings.output, job),
                json=expand(settings.json, job) if settings.json else "", model=settings.model,
                model_dirs=model_dirs({}, job.home, settings.site_models or site_model_dir()),
                report_group=settings.report_group, probe_db=settings.probe_db,
                fleet_record=bool(settings.fleet_store) and report, history=bool(settings.fleet_store) and report,
                report=report, **packing)


def pack_name(job_id, node):
    """The name of a node's pack of a job's traces."""
    if not node or "/" in node or node in (".", ".."):
        raise EpilogError(f"{node!r} is not a node name a pack can be named after")
    return f"ioassess_{job_id}_{node}{PACK_SUFFIX}"


def report_nodes(environ, settings, host):
    """The nodes whose packs the reporting node reads (the per-node layout): every node of the
    job's node list with nodes = first, else (nodes = all, or no node list) its own."""
    nodelist = environ.get("SLURM_JOB_NODELIST") or environ.get("SLURM_NODELIST")
    if settings.nodes == "all" or not nodelist:
        return [host]
    return hosts_of(nodelist)


def hosts_of(nodelist, limit=MAX_NODES):
    """Every host of a Slurm hostlist expression, in its order: "n[08-10,14],gpu3" -> n08, n09,
    n10, n14, gpu3; "rack[2-3]-n[1-2]" -> rack2-n1, rack2-n2, rack3-n1, rack3-n2 (a range keeps
    the width of its first number: "n[8-10]" -> n8, n9, n10)."""
    hosts = []
    items = re.findall(r"(?:[^,\[]|\[[^]]*\])+", nodelist)
    if ",".join(items) != nodelist:
        raise EpilogError(f"node list {nodelist!r}: not a Slurm hostlist expression")
    for item in items:
        choices = []
        for part in re.split(r"(\[[^]]*\])", item):
            if part.startswith("["):
                choices.append(_bracket_values(nodelist, part[1:-1]))
            elif part:
                if "[" in part or "]" in part:
                    raise EpilogError(f"node list {nodelist!r}: unbalanced brackets")
                choices.append([part])
        if math.prod(map(len, choices)) + len(hosts) > limit:
            raise EpilogError(f"node list {nodelist!r}: more than {limit} nodes")
        hosts += ["".join(combination) for combination in itertools.product(*choices)]
    return hosts


def _bracket_values(nodelist, inside):
    values = []
    for piece in inside.split(","):
        low, _, high = piece.partition("-")
        high = high or low
        if not (low.isdigit() and high.isdigit() and int(low) <= int(high)):
            raise EpilogError(f"node list {nodelist!r}: [{inside}] is not a list of numbers and ranges")
        if int(high) - int(low) + len(values) >= MAX_NODES:
            raise EpilogError(f"node list {nodelist!r}: more than {MAX_NODES} nodes")
        values += [str(number).zfill(len(low)) for number in range(int(low), int(high) + 1)]
    return values


def run_worker(job, work, time_limit, memory_limit, history=None):
    """Run the worker as the job's user for at most time_limit seconds and, where a memory cgroup
    can be had (memory_cgroup), memory_limit bytes; (the line to log: its outcome (summary_line)
    or why there is none; the job's record for the site's store it sent, or None). Whatever the
    worker started is ended when it ends or is stopped (end_cgroup, end_descendants), and of its
    output only the last OUTPUT_TAIL bytes are kept, for the line saying why it failed. The
    worker may ask one question (its application's history, work.history): history(question)
    is the answer it gets on its standard input."""
    options = {}
    if os.geteuid() == 0:
        # subprocess sets the supplementary groups, then the group, then the user (real,
        # effective and saved), in the child before it runs Python.
        options = {"user": work.uid, "group": work.gid, "extra_groups": work.groups}
    become_child_subreaper()
    cgroup = new_cgroup()
    memory = memory_cgroup(cgroup, memory_limit)
    result_read, result_write = os.pipe()
    question_read, question_write = os.pipe()
    try:
        worker = subprocess.Popen(worker_command(result_write, question_write), cwd="/", env=_worker_environment(job),
                                  umask=0o077, start_new_session=True, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  stderr=subprocess.STDOUT, pass_fds=(result_write, question_write), **options)
    except OSError as error:
        os.close(result_read)
        os.close(question_read)
        remove_cgroup(cgroup)
        remove_cgroup(memory)
        raise EpilogError(f"{sys.executable}: cannot start the report process: {error.strerror}") from None
    finally:
        os.close(result_write)
        os.close(question_write)
    # Before it has its work the worker runs only the epilog's code: nothing it starts is
    # outside the cgroup.
    cgroup = moved_into(cgroup, worker.pid)
    memory = moved_into(memory, worker.pid)
    result, output = Kept(result_read, RESULT_LIMIT, keep="first"), Kept(worker.stdout.fileno(), OUTPUT_TAIL)
    question = Kept(question_read, QUESTION_LIMIT, keep="first")
    try:
        _send(worker.stdin, json.dumps(dataclasses.asdict(work)).encode() + b"\n", close=not work.history)

        def answer_once():
            if question.ended and not worker.stdin.closed:
                answer = history(question.data) if history else None
                _send(worker.stdin, json.dumps(answer).encode() + b"\n", close=True)
        finished = _read_until_exit(worker, (result, output, question), time.monotonic() + time_limit, answer_once)
        if not finished:
            worker.kill()
        end_cgroup(cgroup)
        left = end_descendants()
        _read_available((result, output))
    finally:
        os.close(result_read)
        os.close(question_read)
        if not worker.stdin.closed:
            worker.stdin.close()
        worker.stdout.close()
        out_of_memory = oom_kills(memory) > 0
        remove_cgroup(cgroup)
        remove_cgroup(memory)
    memory_text = f"the memory limit of {bytes_text(memory_limit)} (memory_limit)"
    record = None
    if not finished:
        line = f"the report took longer than the time limit of {time_limit:g} s and was stopped: no report written"
    elif out_of_memory and worker.returncode == -signal.SIGKILL:
        line = f"the report needed more memory than {memory_text} and was stopped: no report written"
    else:
        line = worker_outcome(worker.returncode, result.data, output.data)
        record = sent_record(result.data) if worker.returncode == 0 else None
        if out_of_memory:
            line += f"; a process of the report was stopped at {memory_text}"
    if left:
        line += (f"; processes it started ({', '.join(map(str, left))}) did not end after SIGKILL (stuck in a "
                 "file system?) and were left")
    return line, record


def worker_command(result_fd, question_fd):
    """`python -I`: none of the user's Python environment (user site-packages and the .pth files
    there, PYTHON* variables, the working directory) reaches the worker. It imports ioassess from
    where the epilog did, sends its outcome on result_fd and its question on question_fd."""
    return [sys.executable, "-I", "-c", WORKER_BOOTSTRAP, PACKAGE_PARENT, str(result_fd), str(question_fd)]


def _worker_environment(job):
    """A small, fixed environment: none of the job's variables, no LD_PRELOAD (no recorder or
    Darshan in the epilog), no PYTHON* variable, and a HOME where no library finds the user's
    configuration files; IOASSESS_CHECK_SCHEMA when the epilog has it (the tests: the worker's
    assessment is checked against its schema, report/schema.py)."""
    checked = {name: os.environ[name] for name in PASSED_TO_WORKER if name in os.environ}
    return {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "USER": job.user, "LOGNAME": job.user, "HOME": "/nonexistent",
            **checked}


def become_child_subreaper():
    """Make this process the one that inherits the orphans of its descendants (a daemon the
    worker started with setsid and left), so that end_descendants finds them all."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        raise EpilogError(f"cannot collect the report's processes (prctl PR_SET_CHILD_SUBREAPER): "
                          f"{os.strerror(ctypes.get_errno())}")


def new_cgroup(controller=""):
    """The path of a new cgroup for the worker below this process's own, of the cgroup2 file
    system, or with a controller, of that controller's v1 hierarchy; None where one cannot be
    made (no such file system, not root, a cgroup tree managed otherwise): then end_descendants
    alone ends the worker's processes."""
    try:
        with open("/proc/self/mounts") as mounts:
            mount = next(fields[1] for fields in map(str.split, mounts)
                         if (fields[2], controller) == ("cgroup2", "")
                         or fields[2] == "cgroup" and controller in fields[3].split(","))
        with open("/proc/self/cgroup") as cgroups:
            own = next(path for _, controllers, path in (line.rstrip("\n").split(":", 2) for line in cgroups)
                       if controllers == controller or controller in controllers.split(","))
        path = os.path.join(mount, own.lstrip("/"), f"ioassess-epilog-{os.getpid()}")
        os.mkdir(path, 0o700)
    except (OSError, StopIteration, ValueError):
        return None
    return path


def memory_cgroup(cgroup, limit_bytes):
    """The cgroup that limits the worker's memory to limit_bytes, without swap: the worker's own
    cgroup (v2) when the memory controller is enabled for it, else a new cgroup of the v1 memory
    hierarchy (a system of both: the worker is moved into each); None where neither can be had,
    or limit_bytes is 0. Past the limit the kernel kills the worker (with all in its cgroup,
    v2) or its largest process (v1): oom_kills counts them."""
    if not limit_bytes:
        return None
    if cgroup is not None and os.path.exists(os.path.join(cgroup, "memory.max")):
        path, limits = cgroup, {"memory.max": limit_bytes, "memory.swap.max": 0, "memory.oom.group": 1}
    else:
        path = new_cgroup("memory")
        limits = {"memory.limit_in_bytes": limit_bytes, "memory.memsw.limit_in_bytes": limit_bytes}
    if path is None:
        return None
    try:
        for name, value in limits.items():
            if os.path.exists(os.path.join(path, name)):   # swap's files: only where swap is accounted
                with open(os.path.join(path, name), "w") as setting:
                    setting.write(str(value))
    except OSError:
        if path != cgroup:
            remove_cgroup(path)
        return None
    return path


def oom_kills(cgroup):
    """How many processes of the cgroup the kernel killed at its memory limit (the `oom_kill`
    line of memory.events, v2, or memory.oom_control, v1); 0 without a memory cgroup."""
    if cgroup is None:
        return 0
    for name in ("memory.events", "memory.oom_control"):
        try:
            with open(os.path.join(cgroup, name)) as events:
                return next((int(line.split()[1]) for line in events if line.startswith("oom_kill ")), 0)
        except OSError:
            continue
    return 0


def moved_into(cgroup, pid):
    """cgroup, with pid moved into it; None (and the cgroup removed) if it cannot be moved."""
    if cgroup is None:
        return None
    try:
        with open(os.path.join(cgroup, "cgroup.procs"), "w") as procs:
            procs.write(str(pid))
    except OSError:
        remove_cgroup(cgroup)
        return None
    return cgroup


def end_cgroup(cgroup):
    """SIGKILL every process in the cgroup, at once with cgroup.kill (Linux 5.14), else one by
    one; end_descendants then reaps them (they are all descendants of this process)."""
    if cgroup is None:
        return
    try:
        with open(os.path.join(cgroup, "cgroup.kill"), "w") as kill:
            kill.write("1")
        return
    except FileNotFoundError:
        pass
    with open(os.path.join(cgroup, "cgroup.procs")) as procs:
        for pid in map(int, procs.read().split()):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


def remove_cgroup(cgroup):
    """Remove the cgroup once empty; one that a stuck process keeps is left (and said so by
    end_descendants)."""
    if cgroup is not None:
        try:
            os.rmdir(cgroup)
        except OSError:
            pass


def end_descendants():
    """SIGKILL this process's children until it has none: as child subreaper, it inherits the
    orphans of every descendant, so this ends everything the worker started, in whatever session
    or process group. The pids that are still there REAP_GRACE_S later (stuck in the kernel, in
    a hung file system) are returned and left."""
    deadline = time.monotonic() + REAP_GRACE_S
    while True:
        children = child_pids(os.getpid())
        for pid in children:
            os.kill(pid, signal.SIGKILL)   # our unreaped child: its pid cannot have been reused
        _reap_children()
        if not children or time.monotonic() > deadline:
            return children
        time.sleep(0.01)   # for the killed to die and their children to be handed to us


def child_pids(parent):
    """The pids whose parent is `parent`, from /proc."""
    pids = []
    for name in os.listdir("/proc"):
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                fields = f.read().rsplit(b")", 1)[1].split()
        except (OSError, IndexError):   # not a process, or one that has just ended
            continue
        if int(fields[1]) == parent:
            pids.append(int(name))
    return pids


def _reap_children():
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


class Kept:
    """A pipe read to its end, of which only the first or the last `limit` bytes are kept."""

    def __init__(self, fd, limit, keep="last"):
        self.fd = fd
        self.limit = limit
        self.keep = keep
        self.data = b""
        self.ended = False

    def read(self):
        chunk = os.read(self.fd, 65536)
        self.ended = not chunk
        if self.keep == "first" and len(self.data) >= self.limit:
            return   # full: the rest is read only so that the writer never blocks
        joined = self.data + chunk
        self.data = joined[:self.limit] if self.keep == "first" else joined[-self.limit:]


def _send(pipe, data, close):
    """data (the Work, or the answer to its question: far smaller than a pipe's buffer) to the
    worker's stdin, closed after if close."""
    try:
        pipe.write(data)
        pipe.flush()
        if close:
            pipe.close()
    except BrokenPipeError:   # the worker ended without reading it: its outcome says why
        pipe.close()


def _read_until_exit(worker, streams, deadline, after_read):
    """Read the worker's streams (Kept: the rest is discarded, and the worker never blocks
    writing), calling after_read after each round, until it exits (True) or the deadline passes
    (False)."""
    while worker.poll() is None:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return False
        reading = {stream.fd: stream for stream in streams if not stream.ended}
        ready, _, _ = select.select(list(reading), [], [], min(remaining, EXIT_POLL_S))
        for fd in ready:
            reading[fd].read()
        after_read()
    return True


def _read_available(streams):
    """What is left in the streams once their writers have ended, without waiting for more
    (a writer stuck in the kernel could keep one open)."""
    for stream in streams:
        os.set_blocking(stream.fd, False)
        try:
            while not stream.ended:
                stream.read()
        except BlockingIOError:
            pass


def worker_outcome(returncode, result, output):
    """The line to log from the worker's exit status, its result (JSON: outcome, left_out, the
    first left out) and the end of its output. The result is checked as any input is: code of
    the user's in the worker could have written it."""
    try:
        sent = parse_json(result.decode("utf-8"))
        outcome, left_out, first = sent["outcome"], sent["left_out"], sent["first_left_out"]
        valid = isinstance(outcome, str) and type(left_out) is int and isinstance(first, str)
    except (Invalid, UnicodeDecodeError, TypeError, KeyError):
        valid = False
    last = output.decode("utf-8", "replace").strip().splitlines()[-1:] or ["no message"]
    if returncode != 0 or not valid:
        return f"the report process failed (exit status {returncode}): {last[0]}"
    return summary_line(outcome, left_out, first)


def sent_record(result):
    """The job's record the worker sent (a dict, checked when it is spooled), or None."""
    try:
        record = parse_json(result.decode("utf-8")).get("record")
    except (Invalid, UnicodeDecodeError, AttributeError):
        return None
    return record if isinstance(record, dict) else None


def answer_history(store, question):
    """The history in the site's store of the application the worker names in its question
    (JSON: app, end, lost_high_s; checked as any input is: the worker runs the user's files),
    or None when the question is malformed or the store cannot answer."""
    from .fleet.history import app_history
    from .fleet.record import job_time
    from .fleet.schema import MAX_STRING
    from .fleet.store import StoreError
    try:
        asked = parse_json(question.decode("utf-8"))
        app, end, lost = asked["app"], job_time(asked["end"]), asked["lost_high_s"]
        if not (type(app) is str and len(app) <= MAX_STRING and type(lost) in (int, float)):
            return None
        return app_history(store, app, end, float(lost))
    except (Invalid, UnicodeDecodeError, TypeError, KeyError, ValueError, StoreError, OSError):
        return None


def spool_job_record(store, record, job):
    """The worker's record of the job into the site's spool, with the job's id and user as Slurm
    gives them (whatever the worker, which runs the user's files, said): "; ..." for the line."""
    from .fleet.record import rekeyed
    from .fleet.schema import RecordError, check_record
    from .fleet.spool import spool_record
    try:
        check_record(record)
        spool_record(store, rekeyed(record, job.job_id, job.user))
    except (RecordError, OSError) as error:
        return f"; its fleet record was not spooled: {printable(str(error))}"
    return "; fleet record spooled"


def summary_line(outcome, left_out, first):
    """The outcome and, when inputs were left out, how many and the first of them."""
    if not left_out:
        return outcome
    return f"{outcome}; {count_text(left_out, 'input')} left out, the first: {first}"


# ---- the worker: runs as the job's user ----

def worker_main(result_fd, question_fd):
    """The worker: the Work as a JSON line on stdin; its outcome as JSON on result_fd; its
    question, if work.history, on question_fd, answered by a JSON line on stdin."""
    from ..html import compile_templates_anew
    from ..inputs.load import LoadError
    from ..models.modelfile import ModelFileError
    compile_templates_anew()   # the job's user's cache of compiled templates is theirs to write
    left_out = []
    record = None
    packed = ""   # the per-node layout: what became of this node's pack, first in the line
    try:
        work = Work(**parse_json(sys.stdin.readline()))
        check_identity(work)
        not_coming = []
        if work.pack:
            try:
                packed = pack_node_traces(work, left_out)
            except EpilogError as error:   # the other nodes' packs are still reported
                packed = str(error)
                not_coming.append(work.pack)
        outcome = ""
        if work.report:
            outcome, assessment = make_job_report(work, left_out, _asker(question_fd) if work.history else None,
                                                  not_coming)
            if work.fleet_record and assessment is not None:
                from .fleet.record import job_record
                record = job_record(assessment, user=work.user, report=work.output,
                                    source=os.path.dirname(work.pack) if work.pack else work.trace_dir)
    except (EpilogError, LoadError, ModelFileError) as error:
        outcome = str(error)
    except Exception as error:   # the parent logs one line; a traceback would not fit the log
        outcome = f"internal error: {type(error).__name__}: {error}"
    outcome = "; ".join(part for part in (packed, outcome) if part)
    result = {"outcome": outcome, "left_out": len(left_out), "first_left_out": (left_out or [""])[0],
              "record": record}
    with open(result_fd, "w", encoding="utf-8") as out:
        json.dump(result, out)
    return 0


def _asker(question_fd):
    """history(assessment) for make_report: the parent's answer to the question of the
    assessment's application, asked once on question_fd, or None."""
    def history(assessment):
        from .fleet.record import app_name
        question = {"app": app_name(assessment["job"]), "end": assessment["job"]["end"],
                    "lost_high_s": assessment["headline"]["lost_high_s"]}
        with open(question_fd, "w", encoding="utf-8") as asking:
            json.dump(question, asking)
        answer = sys.stdin.readline()
        try:
            return parse_json(answer) if answer else None
        except Invalid:
            return None
    return history


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


def make_job_report(work, left_out, history=None, not_coming=()):
    """Find the job's traces and Darshan log and write its report; (the outcome to log, the
    assessment or None). The inputs left out (another user's files, a Darshan log of another job, traces that cannot be
    read) are appended to left_out, one `PATH: problem` each. In the per-node layout the traces
    are the nodes' packs (job_packs; not_coming: packs not to wait for, this node's own when it
    could not be written)."""
    from ..report import make_report
    missing = []
    if work.packs:
        traces, missing = job_packs(work.packs, work.pack_wait, work.uid, left_out, not_coming)
    else:
        traces = job_trace_files(work.trace_dir, work.job_id, work.uid, left_out)
    darshan_logs = (job_darshan_logs(work.darshan_logpath, work.user, work.job_id, work.darshan_days)
                    if work.darshan_logpath else [])
    darshan_log = choose_darshan_log(darshan_logs, work.uid, work.job_id, left_out)
    missing_note = missing_packs_note(missing, len(work.packs), work.pack_wait)
    if not traces and not darshan_log:
        where = (f"no trace {os.path.join(work.trace_dir, f'ioassess_{work.job_id}_*.iot')}" if not work.packs else
                 f"no trace in the packs {os.path.join(os.path.dirname(work.pack), f'ioassess_{work.job_id}_*')}"
                 f"{PACK_SUFFIX}{f' ({missing_note})' if missing else ''}")
        if work.darshan_logpath:
            where += (f" and no Darshan log {work.darshan_logpath}/YEAR/MONTH/DAY/"
                      f"{work.user}_*_id{work.job_id}_*.darshan of the last {work.darshan_days + 1} days")
        return f"nothing to report: {where}", None
    destinations = [path for path in (work.output, work.json) if path]
    for path in destinations:
        check_destination(path, work.uid)
    mode, group, unshared = report_permissions(work.report_group)
    try:
        if missing:   # the report says which nodes it lacks: written here, with that note
            assessment = make_report(traces + darshan_log, work.model or None, None, None, owner_uid=work.uid,
                                     model_dirs=work.model_dirs, probe_db=work.probe_db or None, history=history)
            assessment["job"]["notes"].append(missing_note + ": this report lacks their processes")
            write_assessment(assessment, work.output, work.json, mode, group)
        else:
            assessment = make_report(traces + darshan_log, work.model or None, work.output, work.json or None,
                                     owner_uid=work.uid, mode=mode, group=group, model_dirs=work.model_dirs,
                                     probe_db=work.probe_db or None, history=history)
    except OSError as error:
        raise EpilogError(f"{work.output}: cannot write the report: {error.strerror}") from None
    read = {entry["path"] for entry in assessment["job"]["inputs"]}
    unread = [path for path in traces if path not in read]
    # The reader summarises the traces it refused in a few notes: the first says why, the
    # others are counted (the line names only the first input left out).
    reasons = trace_problems(assessment["job"]["notes"], unread) or [f"{path}: not read" for path in unread[:1]]
    left_out += reasons[:1] + unread[1:]
    # Members of the packs read that were refused: their notes (one per kind of problem).
    left_out += trace_problems(assessment["job"]["notes"], [],
                               [path for path in traces if path in read and path.endswith(PACK_SUFFIX)])
    grid = assessment.get("site_grid") or {}
    if grid.get("problem"):
        left_out.append(f"site grid {grid['path']}: {grid['problem']}")
    return f"wrote {' and '.join(destinations)}{unshared}{f'; {missing_note}' if missing else ''}", assessment


def write_assessment(assessment, output, json_path, mode, group):
    """The report, and the assessment as JSON when json_path, as make_report writes them."""
    from ..files import replace_atomically
    from ..report import write_report
    if json_path:
        replace_atomically(json_path, json.dumps(assessment, indent=1, allow_nan=False) + "\n", mode, group)
    write_report(output, assessment, mode, group)


def missing_packs_note(missing, expected, waited_s):
    """What the line and the report say of the nodes whose packs were not there in time."""
    if not missing:
        return ""
    named = ", ".join(missing[:10]) + (f" and {len(missing) - 10} more" if len(missing) > 10 else "")
    return (f"the packs of {count_text(len(missing), 'node')} of {expected} were missing after {waited_s:g} s: "
            f"{named}")


def pack_node_traces(work, left_out):
    """The per-node layout's first step, on every node: this node's traces of the job (in its
    node-local trace_dir) into one pack (work.pack), written whole and renamed into place, and
    then removed. The outcome, for the line; the traces not packed are appended to left_out."""
    from ..inputs.tracepack import PackError, write_pack
    traces = job_trace_files(work.trace_dir, work.job_id, work.uid, left_out)
    check_destination(work.pack, work.uid, "pack")
    try:
        packed, refused = write_pack(work.pack, traces, work.uid)
    except (OSError, PackError) as error:
        problem = error.strerror if isinstance(error, OSError) else str(error)
        raise EpilogError(f"{work.pack}: cannot write the pack: {problem}; the traces stay in {work.trace_dir}") \
            from None
    left_out += refused
    unremoved = []
    for path in packed:
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass
        except OSError as error:
            unremoved.append(f"{path}: {error.strerror}")
    line = f"packed {count_text(len(packed), 'trace')} into {work.pack}"
    if unremoved:
        line += f" ({count_text(len(unremoved), 'trace')} could not be removed, the first: {unremoved[0]})"
    return line


def job_packs(packs, wait_s, uid, left_out, not_coming=()):
    """(the packs of the nodes to report on that are there, owned by the job's user and not
    empty; the nodes whose packs are not there after waiting at most wait_s seconds for those
    not in not_coming). The packs are looked for by listing their directory (one listing every
    PACK_POLL_S seconds)."""
    from ..inputs.tracepack import pack_member_count
    deadline = time.monotonic() + wait_s
    while True:
        present = set()
        for directory in {os.path.dirname(path) for _, path in packs}:
            try:
                present |= {os.path.join(directory, name) for name in os.listdir(directory)}
            except FileNotFoundError:
                pass
            except OSError as error:
                raise EpilogError(f"{directory}: cannot list the packs: {error.strerror}") from None
        missing = [node for node, path in packs if path not in present]
        awaited = [path for _, path in packs if path not in present and path not in not_coming]
        if not awaited or time.monotonic() >= deadline:
            break
        time.sleep(PACK_POLL_S)
    found = users_files([path for _, path in packs if path in present], uid, left_out)
    return [path for path in found if pack_member_count(path) != 0], missing


def trace_problems(notes, traces, packs=()):
    """The job's notes that say why one of the traces could not be read: those that start with
    its path as TraceFileError puts it (behind "not used: " when no trace could be read), or
    with the path of a member of one of the packs (PACK/MEMBER)."""
    from ..inputs.load import NOT_USED
    from ..inputs.trace import TraceFileError
    prefixes = tuple(str(TraceFileError(path, "")) for path in traces) + tuple(f"{pack}/" for pack in packs)
    return [note for note in notes if prefixes and note.removeprefix(NOT_USED).startswith(prefixes)]


def report_permissions(group_name):
    """(mode, gid, remark) of the reports: 0600, or 0640 and the site's report_group when the
    job's user is in it; remark: why the report is not shared with the group, for the line."""
    if not group_name:
        return 0o600, -1, ""
    try:
        gid = grp.getgrnam(group_name).gr_gid
    except KeyError:
        return 0o600, -1, f" (mode 0600: report_group {group_name} does not exist)"
    if gid not in os.getgroups() and gid != os.getegid():
        return 0o600, -1, f" (mode 0600: the job's user is not in report_group {group_name})"
    return 0o640, gid, ""


def job_trace_files(trace_dir, job_id, uid, left_out):
    """The job's traces in trace_dir: regular files ioassess_<job id>_*.iot (the recorder names
    them by the job id in their header) owned by the job's user (uid), sorted. Other files of
    that name (another user's, links) are appended to left_out."""
    try:
        entries = list(os.scandir(trace_dir))
    except FileNotFoundError:
        return []
    except OSError as error:
        raise EpilogError(f"{trace_dir}: cannot list the traces: {error.strerror}") from None
    prefix = f"ioassess_{job_id}_"
    named = sorted((entry.path for entry in entries if entry.name.startswith(prefix) and entry.name.endswith(".iot")))
    return users_files(named, uid, left_out)


def users_files(paths, uid, left_out):
    """The paths that are regular files of uid's; the others are appended to left_out."""
    kept = []
    for path in paths:
        problem = not_the_users_file(path, uid)
        if problem:
            left_out.append(f"{path}: {problem}")
        else:
            kept.append(path)
    return kept


def not_the_users_file(path, uid):
    """Why path (not followed if a link) is not a regular file of uid's, or None."""
    try:
        status = os.lstat(path)
    except OSError as error:
        return f"cannot read: {error.strerror}"
    if not stat.S_ISREG(status.st_mode):
        return "not a regular file: left out"
    if status.st_uid != uid:
        return f"belongs to uid {status.st_uid}, not the job's user: left out"
    return None


def job_darshan_logs(logpath, user, job_id, days, today=None):
    """The files named as the job's Darshan logs, largest first. Darshan writes LOGPATH/<year>/
    <month>/<day>/<user>_<exe>_id<job id>_<month>-<day>-<seconds>-<hash>.darshan, dated by the
    job's start in local time, without leading zeros; every day directory from today back
    `days` days is searched. The day directories are writable by every user, so a name proves
    nothing (another user's file named as the job's log must not end the search):
    choose_darshan_log checks the owner and the content of each file found."""
    today = today or datetime.date.today()
    found = []
    for back in range(days + 1):
        day = today - datetime.timedelta(days=back)
        directory = os.path.join(logpath, str(day.year), str(day.month), str(day.day))
        try:
            entries = list(os.scandir(directory))
        except FileNotFoundError:
            continue
        except OSError as error:
            raise EpilogError(f"{directory}: cannot list the Darshan logs: {error.strerror}") from None
        found += [entry for entry in entries if entry.name.startswith(f"{user}_")
                  and f"_id{job_id}_" in entry.name and entry.name.endswith(".darshan")]
    return [entry.path for entry in sorted(found, key=lambda entry: -_size(entry))]


def _size(entry):
    """The size of a directory entry (not followed if a link); 0 if it is gone."""
    try:
        return entry.stat(follow_symlinks=False).st_size
    except OSError:
        return 0


def choose_darshan_log(paths, uid, job_id, left_out):
    """[the largest of paths that is a regular file of the job's user and, read with the
    project's Darshan reader, a log of job job_id], or []; the others are appended to left_out."""
    from ..inputs.darshan_log import DarshanLogError, read_darshan_log
    owned = users_files(paths, uid, left_out)
    for index, path in enumerate(owned):
        try:
            logged_job = read_darshan_log(path).job_id
        except DarshanLogError as error:
            left_out.append(str(error))
            continue
        if logged_job != job_id:
            left_out.append(f"{path}: the log of job {logged_job}, not of job {job_id}: left out")
            continue
        left_out += [f"{other}: another Darshan log of this job: not assessed, {path} is larger"
                     for other in owned[index + 1:]]
        return [path]
    return []


def check_destination(path, uid, what="report"):
    """Refuse a report (or pack) path that is a symbolic link, or whose directory is one or
    belongs to another user than the job's or root: a link, or a directory someone else
    controls, could send the job's report over a file of their choosing. A missing directory is
    created (0700)."""
    directory = os.path.dirname(path)
    try:
        os.makedirs(directory, exist_ok=True)
        status = os.lstat(directory)
    except OSError as error:
        raise EpilogError(f"{directory}: cannot create the {what}'s directory: {error.strerror}") from None
    if stat.S_ISLNK(status.st_mode):
        raise EpilogError(f"{directory}: is a symbolic link: not followed, no {what} written")
    if status.st_uid not in (uid, 0):
        raise EpilogError(f"{directory}: belongs to uid {status.st_uid}, neither the job's user nor root: "
                          f"no {what} written")
    try:
        status = os.lstat(path)
    except FileNotFoundError:
        return
    if stat.S_ISLNK(status.st_mode):
        raise EpilogError(f"{path}: is a symbolic link: not followed, left as it is; no {what} written")
    if not stat.S_ISREG(status.st_mode):
        raise EpilogError(f"{path}: exists and is not a regular file: no {what} written")

