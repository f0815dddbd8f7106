"""The `ioassess` command line: `run` a command under the recorder, `report` on a job's traces
and Darshan logs, `export` its ops for another viewer, `show` what traces hold, list the cause
`models`, `train` the cause models of a file system, `calibrate` a model of this machine's file
system as any user, measure the site's I/O-model grid (`iomodels`, docs/iomodels.md), and the
`epilog` that makes a job's report when Slurm ends it (docs/epilog.md).

Exit statuses and every option are documented in docs/cli.md. Known bad input (unreadable
traces, missing directories, a missing library) ends in one `ioassess: ...` line on stderr and
exit status 2, never a traceback.
"""
import argparse
import ctypes
import datetime
import functools
import importlib.util
import json
import os
import pwd
import re
import resource
import signal
import stat
import subprocess
import sys
import time

from . import mpiio_library_path, recorder_library_path
from .site.epilog import add_options as add_epilog_options, run as run_epilog
from .escape import printable, printable_lines
from .files import file_system_facts, file_system_of
from .models.modelfile import (DEFAULT_MODEL, SITE_MODELS_DIR, SITE_MODELS_ENV, ModelFileError, find_models, load_model,
                               model_path, model_summary, site_model_dir, user_model_dir)
from .site.training import PROFILES, TrainingError, calibrate, check_training_dir, refit, train
from .site.iomodels import (DEFAULT_REPEATS, DEFAULT_TOTAL_BYTES, LAYOUTS, SITE_GRID_ENV, SITE_GRID_PATH, GridFileError,
                            IoModelsError, Sweep, default_grid_path, default_processes, format_grid, load_site_grid,
                            measure_grid, parse_size)
from .inputs.load import LoadError, input_kind
from .site.fleet.command import add_commands as add_fleet_commands
from .site.probe.command import add_commands as add_probe_commands
from .report import export_job, make_report
from .report.invariants import violations
from .report.summary import text_summary
from .show import format_text, summarise
from .units import count_text
from .inputs.trace import TraceFileError, read_trace_dir

USAGE_ERROR = 2
INTERRUPTED = 130
COMMAND_NOT_FOUND = 127
COMMAND_NOT_EXECUTABLE = 126
# Sent to one process (kill PID, a batch system's warning to the batch shell): passed on.
FORWARDED_SIGNALS = (signal.SIGUSR1, signal.SIGUSR2)
# Sent to every process of the job, command included, by a terminal (^C, ^\, hangup), a batch
# system (scancel, a time limit, preemption), `timeout` or `kill -- -PGID`: not passed on (the
# command would get them twice), and they do not stop ioassess before the command has ended.
JOB_SIGNALS = (signal.SIGINT, signal.SIGQUIT, signal.SIGTERM, signal.SIGHUP)
# Bytes enough for any libc's struct sigaction (152 on x86-64 glibc), kept as an opaque copy.
SIGACTION_BYTES = 512
_LIBC = ctypes.CDLL(None, use_errno=True)
JOB_ID_VARIABLES = ("SLURM_JOB_ID", "PBS_JOBID", "LSB_JOBID", "FLUX_JOB_ID")
# The most of the report's summary that its process hands back.
SUMMARY_BYTES = 64 * 1024


class UsageError(Exception):
    """Bad input to a command: the message is the one line printed after `ioassess: `."""


class _NotStarted(Exception):
    """The command could not be started; exit_status is the shell's for that case."""

    def __init__(self, message, exit_status):
        super().__init__(message)
        self.exit_status = exit_status


class _Parser(argparse.ArgumentParser):
    def error(self, message):
        raise UsageError(f"{message} (see `{self.prog} --help`)")


def main(argv=None):
    parser = _build_parser()
    try:
        args = parser.parse_args(argv)
        if not hasattr(args, "handler"):
            parser.print_help(sys.stderr)
            return USAGE_ERROR
        return args.handler(args)
    except BrokenPipeError:
        # stdout's reader went away (`ioassess show ... | head`): stop quietly, as other tools do.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    except (UsageError, TraceFileError, OSError) as error:
        _print_error(_describe(error))
        # Slurm drains a node whose Epilog fails: `ioassess epilog` exits 0 even on a usage mistake.
        return 0 if (sys.argv[1:] if argv is None else argv)[:1] == ["epilog"] else USAGE_ERROR


def _build_parser():
    parser = _Parser(prog="ioassess", description="Per-operation I/O recorder and assessment for HPC jobs.")
    commands = parser.add_subparsers(metavar="COMMAND")
    run = commands.add_parser("run", help="run a command under the recorder",
                              description="Run CMD with the recorder preloaded; one trace file per process "
                                          "goes to the trace directory.")
    run.add_argument("--trace-dir", metavar="DIR",
                     help="where the traces go (default: ./ioassess-[<job id>-]YYYYmmdd-HHMMSS-<pid>); "
                          "must not already hold traces")
    run.add_argument("--model", metavar="NAME|PATH",
                     help="the cause model of the report (default: the one made where the job's I/O went; "
                          "see `ioassess models`)")
    run.add_argument("command", nargs=argparse.REMAINDER, metavar="-- CMD ARGS", help="the command to run")
    run.set_defaults(handler=_run)
    report = commands.add_parser(
        "report", help="assess a job and write its HTML report",
        description="Assess a job from its trace directories and/or Darshan logs (all of one job) and write "
                    "the HTML report and, with --json, the assessment as JSON.")
    report.add_argument("inputs", nargs="+", metavar="INPUT",
                        help="a trace directory, a trace file (.iot) or a Darshan log (.darshan)")
    report.add_argument("--model", metavar="NAME|PATH",
                        help="a cause model name (see `ioassess models`) or file (default: the one whose provenance "
                             "fits the job's file systems and hosts best)")
    report.add_argument("-o", "--output", metavar="REPORT.html",
                        help="the HTML report to write (default: report.html, none with --format text)")
    report.add_argument("--format", choices=("html", "text"), default="html",
                        help="html: write the HTML report; text: print a short summary on standard output (what "
                             "the batch job's output shows), and the HTML report only with -o")
    report.add_argument("--json", metavar="ASSESSMENT.json", help="also write the assessment as JSON")
    report.add_argument("--owner", metavar="USER|UID",
                        help="take only the traces this user owns (default: yours; when run as root, the owner of "
                             "the trace directories given, or of the directories of the trace files given)")
    report.add_argument("--site-grid", metavar="GRID.json",
                        help=f"the I/O-model grid (ioassess iomodels) to place the job on (default: the site's, "
                             f"${SITE_GRID_ENV} or {SITE_GRID_PATH} if it exists)")
    report.add_argument("--probe-db", metavar="PROBE.sqlite",
                        help="the file-system probe's store, for the file system's slowdown during the job "
                             "(default: $IOASSESS_PROBE_DB, else probe_db in /etc/ioassess/epilog.conf)")
    report.add_argument("--check", action="store_true",
                        help="also check the assessment against the rules every assessment keeps (docs/assessment.md, "
                             "\"The rules an assessment keeps\"): each broken one on standard error, exit status 1")
    report.set_defaults(handler=_report)
    export = commands.add_parser(
        "export", help="write a job's ops for another viewer (Perfetto, Parquet)",
        description="Write the ops of a job (its trace directories, or a Darshan log with DXT) for other tools: "
                    "--perfetto, the Trace Event Format that Perfetto's UI and chrome://tracing open, one track per "
                    "process and thread, each op a slice named and coloured by its class; --parquet, a table of "
                    "one row per op with its class and time lost.")
    export.add_argument("inputs", nargs="+", metavar="INPUT",
                        help="a trace directory, a trace file (.iot) or a Darshan log (.darshan)")
    export.add_argument("--perfetto", metavar="OUT.json", help="the Trace Event Format file to write")
    export.add_argument("--parquet", metavar="OUT.parquet",
                        help="a Parquet table of the ops (pandas, DuckDB), one row per op with its class and time "
                             "lost (needs pyarrow)")
    export.add_argument("--model", metavar="NAME|PATH",
                        help="the cause model that classifies the ops (default: as for `ioassess report`)")
    export.add_argument("--owner", metavar="USER|UID", help="take only the traces this user owns (as for "
                                                             "`ioassess report`)")
    export.set_defaults(handler=_export)
    show = commands.add_parser("show", help="summarise trace directories",
                               description="Summarise the traces in one or more directories.")
    show.add_argument("dirs", nargs="+", metavar="DIR", help="a trace directory (or a single .iot file)")
    show.add_argument("--json", action="store_true", help="print a JSON object instead of text (see docs/cli.md)")
    show.add_argument("--owner", metavar="USER|UID",
                      help="take only the traces this user owns (default: as for `ioassess report`: yours; when run "
                           "as root, the owner of the directories given)")
    show.set_defaults(handler=_show)
    models = commands.add_parser("models", help="list the cause models",
                                 description="List the cause models of your model directory, the site's and the "
                                             "shipped ones (the default marked *), or check and describe the "
                                             "given ones.")
    models.add_argument("models", nargs="*", metavar="MODEL",
                        help="a model name or a model file (.json) to check and describe")
    models.set_defaults(handler=_models)
    training = commands.add_parser(
        "train", help="measure the cause models of a file system (for admins)",
        description="Run the training workloads under the recorder in a directory of the file system to "
                    "model, and write the model file and its training report (MODEL.html).")
    source = training.add_mutually_exclusive_group(required=True)
    source.add_argument("--dir", metavar="DIR",
                        help="a writable directory on the file system to model (quick needs 1.25 GiB free, "
                             "full 2.25 GiB); its training files are removed at the end")
    source.add_argument("--refit", metavar="MEASUREMENTS.npz",
                        help="fit again from the measurements an earlier training saved beside its model")
    training.add_argument("--profile", choices=sorted(PROFILES), default="quick",
                          help="quick (minutes) or full (more sizes and layouts; about half an hour)")
    training.add_argument("-o", "--output", metavar="MODEL.json",
                          help="the model file to write (default: ./<fs type>-<host>.json)")
    training.set_defaults(handler=_train)
    calibration = commands.add_parser(
        "calibrate", help="measure a cause model of this machine and file system (any user, under a minute)",
        description="Run a short training in DIR as any user can (its own file evicted with POSIX_FADV_DONTNEED) "
                    "and write a cause model of this host and DIR's file system, which reports of jobs on it "
                    "then use (docs/cli.md).")
    calibration.add_argument("--dir", metavar="DIR", default=".",
                             help="a writable directory on the file system to model, with 0.5 GiB free (default: "
                                  "the current directory); its calibration files are removed at the end")
    destination = calibration.add_mutually_exclusive_group()
    destination.add_argument("--site", action="store_true",
                             help=f"write into the site's model directory (${SITE_MODELS_ENV}, else the epilog "
                                  f"config's site_models, else {SITE_MODELS_DIR}; for admins) instead of yours")
    destination.add_argument("--out", metavar="MODEL.json",
                             help="write this file instead (default: HOST-TYPE-MOUNT.json in your model directory, "
                                  "${XDG_DATA_HOME:-~/.local/share}/ioassess/models)")
    calibration.set_defaults(handler=_calibrate)
    iomodels = commands.add_parser(
        "iomodels", help="measure the site's I/O-model grid with an MPI benchmark (for admins)",
        description="Write the same total size in every I/O model from serial to one shared file, with "
                    "mpiexec in a directory of the file system to measure, and save the site's grid "
                    "(docs/iomodels.md); or print a saved grid.")
    grid_source = iomodels.add_mutually_exclusive_group(required=True)
    grid_source.add_argument("--dir", metavar="DIR",
                             help="a writable directory on the file system to measure; the benchmark's files "
                                  "are removed at the end")
    grid_source.add_argument("--show", metavar="GRID.json", nargs="?", const="",
                             help=f"print a grid file (default: the site's grid, ${SITE_GRID_ENV} or "
                                  f"{SITE_GRID_PATH})")
    iomodels.add_argument("--total-bytes", metavar="N", type=parse_size, default=DEFAULT_TOTAL_BYTES,
                          help="written in every model, a power of two; k, M, G, T suffixes (default: 1G)")
    iomodels.add_argument("--processes", metavar="N", type=int, default=default_processes(),
                          help="MPI ranks, a power of two (default: this machine's CPUs rounded down to a "
                               f"power of two, {default_processes()})")
    iomodels.add_argument("--ranks-per-node", metavar="N", type=int,
                          help="simulate nodes of N consecutive ranks (default: the nodes are the hosts)")
    iomodels.add_argument("--repeats", metavar="R", type=int, default=DEFAULT_REPEATS,
                          help=f"runs of every model; the grid keeps the median (default: {DEFAULT_REPEATS})")
    iomodels.add_argument("--layout", choices=LAYOUTS, default=LAYOUTS[0],
                          help="each writer's part of its file: one contiguous range, or every k-th 1 MiB "
                               "block (default: contiguous)")
    iomodels.add_argument("-o", "--output", metavar="GRID.json",
                          help="the grid file to write (default: ./iomodels-<fs type>-<host>.json)")
    iomodels.set_defaults(handler=_iomodels)
    epilog = commands.add_parser(
        "epilog", help="make an ending job's report, from Slurm's Epilog or TaskEpilog (for admins)",
        description="Find the job's traces and Darshan log and write its report as the job's user "
                    "(docs/epilog.md). Exits 0 whatever happens: Slurm drains a node whose Epilog fails.")
    add_epilog_options(epilog)
    epilog.set_defaults(handler=run_epilog)
    add_probe_commands(commands)
    add_fleet_commands(commands)
    return parser


def _describe(error):
    if isinstance(error, OSError) and error.strerror:
        return f"{error.filename}: {error.strerror}" if error.filename else error.strerror
    return str(error)


def _print_error(message):
    """One line on stderr; the file names in it are the job's, so printed with escapes."""
    print(f"ioassess: {printable(str(message))}", file=sys.stderr)


def _print_text(text):
    """Text for stdout, a terminal or a batch job's output, with its control characters escaped:
    names in it come from jobs, model files, grids and directories others can write."""
    sys.stdout.write(printable_lines(text))


def _show(args):
    traceset = read_trace_dir(args.dirs, trace_owner(args.dirs, args.owner))
    summary = summarise(traceset)
    if args.json:
        sys.stdout.write(json.dumps(summary, indent=2) + "\n")
    else:
        _print_text(format_text(summary))
    sys.stdout.flush()
    for error in traceset.errors:
        _print_error(error)
    return USAGE_ERROR if traceset.errors else 0


def _report(args):
    output = args.output or ("report.html" if args.format == "html" else None)
    try:
        owner_uid = trace_owner(trace_inputs(args.inputs), args.owner)
        assessment = make_report(args.inputs, args.model, output, args.json, sys.stderr, args.site_grid, owner_uid,
                                 probe_db=args.probe_db)
    except (LoadError, ModelFileError, GridFileError) as error:
        _print_error(error)
        return USAGE_ERROR
    if args.format == "text":
        _print_text(text_summary(assessment, output))
    written = [path for path in (output, args.json) if path]
    if written:
        _print_error("wrote " + " and ".join(written))
    broken = violations(assessment) if args.check else []
    for rule in broken:
        _print_error(f"rule broken: {rule}")
    return 1 if broken else 0


def _export(args):
    if not (args.perfetto or args.parquet):
        raise UsageError("export: say what to write: --perfetto OUT.json and/or --parquet OUT.parquet "
                         "(see `ioassess export --help`)")
    if args.parquet and importlib.util.find_spec("pyarrow") is None:
        raise UsageError("export --parquet needs pyarrow: pip install pyarrow")
    try:
        ops = export_job(args.inputs, args.perfetto, args.parquet, args.model,
                         trace_owner(trace_inputs(args.inputs), args.owner))
    except (LoadError, ModelFileError) as error:
        _print_error(error)
        return USAGE_ERROR
    _print_error("wrote " + " and ".join(path for path in (args.perfetto, args.parquet) if path) + f": {ops} ops")
    return 0


def trace_inputs(inputs):
    """The inputs of `report` and `export` that are traces (load_job says what is wrong with the
    others)."""
    return [path for path in inputs if os.path.lexists(path) and input_kind(path) == "trace"]


def trace_owner(traces, named=None):
    """The uid whose traces `report` and `show` take from the trace directories and files given:
    the user named (a name or a uid); else the invoking user; as root, the owner of the trace
    directories (for a trace file, of its directory), who must be one user."""
    if named:
        return _uid(named)
    if os.geteuid() != 0:
        return os.geteuid()
    owners = {}
    for path in filter(os.path.lexists, traces):   # the reader says what is wrong with a missing one
        directory = path if os.path.isdir(path) else os.path.dirname(os.path.abspath(path))
        owners.setdefault(os.stat(directory).st_uid, directory)
    if len(owners) > 1:
        named = ", ".join(f"{directory} (uid {uid})" for uid, directory in owners.items())
        raise UsageError(f"the trace directories belong to different users: {named}; say whose traces to take "
                         "with --owner")
    return next(iter(owners), 0)


def _uid(user):
    if user.isdigit():
        return int(user)
    try:
        return pwd.getpwnam(user).pw_uid
    except KeyError:
        raise UsageError(f"--owner {user}: no such user") from None


def _models(args):
    """One line per model: a * for the shipped default, where it is (user, site, shipped), its
    name, its provenance (or why it cannot be used) and its file."""
    if args.models:
        listing, failures = [], 0
        for name_or_path in args.models:
            try:
                model = load_model(name_or_path)
            except ModelFileError as error:
                _print_error(error)
                failures += 1
                continue
            listing.append(("given", model.name, model_path(name_or_path), model_summary(model)))
    else:
        failures = 0
        listing = [(found.origin, found.name, found.path,
                    model_summary(found.model) if found.model else found.problem) for found in find_models()]
        if not any(origin == "shipped" and name == DEFAULT_MODEL for origin, name, _, _ in listing):
            listing.append(("shipped", DEFAULT_MODEL, None, "(not installed: train one with `ioassess train`)"))
    listing = [(origin, printable(name), path, summary) for origin, name, path, summary in listing]
    width = max((len(name) for _, name, _, _ in listing), default=0)
    for origin, name, path, summary in listing:
        mark = "*" if (origin, name) == ("shipped", DEFAULT_MODEL) else " "
        _print_text(f"{mark} {origin:<7}  {name:<{width}}  {summary}" + (f"; {path}" if path else "") + "\n")
    return USAGE_ERROR if failures else 0


def _train(args):
    default = f"{file_system_of(args.dir)[0]}-{os.uname().nodename}.json" if args.dir else "refit.json"
    output = args.output or default
    if not output.endswith(".json"):
        raise UsageError(f"{output}: the model file name must end in .json")
    work = functools.partial(refit, args.refit, output) if args.refit else \
        functools.partial(train, args.dir, args.profile, output, sys.stderr)
    result, status = _until_interrupted(work, (TrainingError, ModelFileError),
                                        "training interrupted; its files were removed and no model was written")
    if status:
        return status
    _print_error(f"wrote {output} and its training report {result[1]}")
    return 0


def _calibrate(args):
    started = time.monotonic()
    result, status = _until_interrupted(functools.partial(_calibrate_into, args),
                                        (TrainingError, ModelFileError, UsageError),
                                        "calibration interrupted; its files were removed and no model was written")
    if status:
        return status
    model, output = result
    file_system = model.provenance["file_system"]
    left = model.provenance["generator"].get("not_evicted") or []
    _print_error(f"wrote {output}: {file_system['type']} at {file_system['mount']} on {model.provenance['host']}, "
                 f"measured in {time.monotonic() - started:.0f} s" +
                 (f"; not evicted for its uncached state: {'; '.join(left)}" if left else ""))
    return 0


def _calibrate_into(args):
    """Check DIR and the model's directory before measuring; (model, path written)."""
    check_training_dir(args.dir, PROFILES["calibrate"])
    output = args.out or os.path.join(site_model_dir() if args.site else user_model_dir(),
                                      calibrated_model_name(os.uname().nodename, file_system_facts(args.dir)) + ".json")
    if not output.endswith(".json"):
        raise UsageError(f"{output}: the model file name must end in .json")
    _check_output_dir(os.path.dirname(os.path.abspath(output)))
    return calibrate(args.dir, output, sys.stderr), output


def calibrated_model_name(host, file_system):
    """HOST-TYPE-MOUNT, the mount point's / as - ("root" for /), in letters, digits, . _ and -:
    one model per host and file system, replaced when calibrated again."""
    mount = file_system.get("mount", "/").strip("/").replace("/", "-") or "root"
    name = f"{host.split('.')[0]}-{file_system.get('type', 'unknown')}-{mount}"
    return re.sub(r"[^A-Za-z0-9._-]", "_", name)


def _check_output_dir(directory):
    """Create the model directory if needed; refuse one that cannot be written, before measuring."""
    try:
        os.makedirs(directory, exist_ok=True)
    except OSError as error:
        raise UsageError(f"{directory}: cannot create the model directory: {error.strerror}") from None
    if not os.access(directory, os.W_OK | os.X_OK):
        raise UsageError(f"{directory}: cannot write the model there (not writable)")


def _until_interrupted(work, errors, interrupted):
    """(work(), 0); or (None, exit status) after one line on stderr: 2 for the errors given, 130
    for Ctrl-C or SIGTERM, whose line is `interrupted`. SIGTERM is raised as KeyboardInterrupt
    while work runs, so that work removes its files alike for both."""
    previous = signal.signal(signal.SIGTERM, _interrupt)
    try:
        return work(), 0
    except errors as error:
        _print_error(error)
        return None, USAGE_ERROR
    except KeyboardInterrupt:
        _print_error(interrupted)
        return None, INTERRUPTED
    finally:
        signal.signal(signal.SIGTERM, previous)


def _interrupt(_signum, _frame):
    raise KeyboardInterrupt


def _iomodels(args):
    if args.dir is None:
        return _show_grid(args.show or None)
    sweep = Sweep(args.dir, args.total_bytes, args.processes, args.ranks_per_node, args.repeats, args.layout)
    output = args.output or default_grid_path(args.dir)
    grid, status = _until_interrupted(functools.partial(measure_grid, sweep, output, sys.stderr),
                                      (IoModelsError, GridFileError),
                                      "iomodels interrupted; its files were removed and no grid was written")
    if status:
        return status
    _print_text(format_grid(grid))
    _print_error(f"wrote {output}")
    return 0


def _show_grid(path):
    try:
        found = load_site_grid(path)
    except GridFileError as error:
        _print_error(error)
        return USAGE_ERROR
    if found is None:
        raise UsageError(f"no site grid: give GRID.json, set {SITE_GRID_ENV} or install {SITE_GRID_PATH}")
    _print_text(f"{found[0]}: " + format_grid(found[1]))
    return 0


def _run(args):
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        raise UsageError("run needs a command: ioassess run [--trace-dir DIR] -- CMD ARGS...")
    trace_dir = args.trace_dir or default_trace_dir(os.environ)
    try:
        env = _recording_env(trace_dir)
    except UsageError as problem:
        _print_error(f"{problem}; running the command unrecorded")
        env = None
    summaries = []
    try:
        returncode = _run_passing_on_signals(
            command, env, after_command=None if env is None else
            lambda: summaries.append(_report_in_child(trace_dir, args.model)))
    except _NotStarted as failure:
        _print_error(failure)
        return failure.exit_status
    for summary in summaries:
        _print_error(f"{_traces_in(trace_dir)}; {summary}")
    if returncode < 0:
        _end_by_signal(-returncode)
    return 128 - returncode if returncode < 0 else returncode


def _recording_env(trace_dir):
    """The command's environment with the recorder preloaded into trace_dir, made ready; a
    UsageError says why the command cannot be recorded."""
    library = recorder_library_path()
    if not os.path.isfile(library):
        raise UsageError(f"the recorder library {library} is missing: reinstall ioassess (pip install .)")
    try:
        _prepare_trace_dir(trace_dir)
    except OSError as error:
        raise UsageError(_describe(error)) from None
    preload = preload_with(os.environ.get("LD_PRELOAD", ""), library, mpiio_library_path())
    return dict(os.environ, IOASSESS_TRACE_DIR=os.path.abspath(trace_dir), LD_PRELOAD=preload)


def _report_in_child(trace_dir, model):
    """_report_after_run in a process of its own, so that nothing the report does (an error, a
    crash, the kernel's out-of-memory killer) changes how ioassess ends; a job signal (^C,
    SIGTERM) stops it. Returns what became of the report, for the summary line."""
    sys.stdout.flush()   # what is buffered now is written once, by this process
    sys.stderr.flush()
    try:
        reading, writing = os.pipe()
        pid = os.fork()
    except OSError as error:
        return f"no report: its process could not be started: {error.strerror}"
    if pid == 0:
        os.close(reading)
        try:
            os.write(writing, _report_after_run(trace_dir, model).encode(errors="replace")[:SUMMARY_BYTES])
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(0)
    os.close(writing)
    try:
        with os.fdopen(reading, "rb") as pipe:
            summary = pipe.read(SUMMARY_BYTES).decode(errors="replace")
        status = os.waitpid(pid, 0)[1]
    except KeyboardInterrupt:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        return "no report: interrupted"
    if os.WIFSIGNALED(status):
        return f"no report: the report's process was killed by {signal.Signals(os.WTERMSIG(status)).name}"
    return summary or "no report: the report's process ended without a word"


def _traces_in(trace_dir):
    """How many traces trace_dir holds, for the summary line."""
    try:
        traces = sum(name.endswith(".iot") for name in os.listdir(trace_dir))
    except OSError as error:
        return f"no traces: {_describe(error)}"
    return f"traces of {count_text(traces, 'process')} in {trace_dir}"


def _report_after_run(trace_dir, model):
    """Write report.html and assessment.json beside the traces, also after a failed command;
    returns what became of them, for the summary line. A progress bar and a broken site grid's
    own line go to stderr only on a terminal; elsewhere (a batch job) the summary line says the
    grid's problem."""
    html, assessment_path = os.path.join(trace_dir, "report.html"), os.path.join(trace_dir, "assessment.json")
    terminal = sys.stderr.isatty()
    try:
        assessment = make_report([trace_dir], model, html, assessment_path, sys.stderr if terminal else None)
    except (LoadError, ModelFileError, OSError) as error:
        return f"no report: {_describe(error)}"
    except KeyboardInterrupt:
        return "no report: interrupted"
    except Exception as error:  # a defect of the reporter: said, and the command's status kept
        return f"no report: internal error ({type(error).__name__}: {error})"
    wrote = f"wrote {html} and {assessment_path}"
    grid = assessment.get("site_grid") or {}
    if grid.get("problem") and not terminal:
        return f"{wrote}; site grid not used: {grid['path']}: {grid['problem']}"
    return wrote


def default_trace_dir(environ, now=None):
    """./ioassess-[<job id>-]YYYYmmdd-HHMMSS-<pid>: one directory per run, also when a job
    runs several commands under the recorder."""
    job_id = next((environ[name] for name in JOB_ID_VARIABLES if environ.get(name)), None)
    job_part = re.sub(r"[^A-Za-z0-9.-]", "-", job_id) + "-" if job_id else ""
    now = now or datetime.datetime.now()
    return os.path.join(".", f"ioassess-{job_part}{now:%Y%m%d-%H%M%S}-{os.getpid()}")


def preload_with(preload, recorder, mpiio_recorder=None):
    """LD_PRELOAD with the MPI-IO recorder (if built) in front of the libraries already listed
    and the recorder after them: with Darshan, `libioassess-mpiio.so:libdarshan.so:libioassess.so`.
    Both tools see every MPI-IO call in either order (each wraps the PMPI names too); Darshan
    in front of the POSIX recorder keeps its own bookkeeping out of the durations ioassess
    classifies (docs/architecture.md, "Beside Darshan's runtime")."""
    ours = [recorder, mpiio_recorder]
    others = [entry for entry in re.split(r"[: ]+", preload.strip()) if entry and entry not in ours]
    return ":".join(([mpiio_recorder] if mpiio_recorder else []) + others + [recorder])


def _prepare_trace_dir(trace_dir):
    """Create the directory (mode 0700); refuse one that already holds traces, so that earlier
    traces are never mixed with or overwritten by new ones, and one the recorder would not
    record into (another user's, or writable by others: docs/security.md), so that a job is not
    run for nothing."""
    os.makedirs(trace_dir, mode=0o700, exist_ok=True)
    status = os.lstat(trace_dir)
    if status.st_uid != os.getuid() or status.st_mode & 0o022 or not stat.S_ISDIR(status.st_mode):
        raise UsageError(f"{trace_dir}: the recorder records only into a directory of yours that no one else can "
                         f"write (this one: uid {status.st_uid}, mode {stat.S_IMODE(status.st_mode):04o}"
                         f"{', a symbolic link' if stat.S_ISLNK(status.st_mode) else ''}): choose another --trace-dir")
    above = os.path.dirname(os.path.realpath(trace_dir))
    while True:
        status = os.stat(above)
        if status.st_uid not in (0, os.getuid()) or (status.st_mode & 0o022 and not status.st_mode & stat.S_ISVTX):
            raise UsageError(f"{trace_dir}: the recorder records only below directories that no one but root and you "
                             f"can change, and {above} is not one (uid {status.st_uid}, mode "
                             f"{stat.S_IMODE(status.st_mode):04o}): choose another --trace-dir")
        if above == "/":
            break
        above = os.path.dirname(above)
    earlier = [name for name in os.listdir(trace_dir) if name.endswith(".iot")]
    if earlier:
        raise UsageError(f"{trace_dir} already holds {len(earlier)} trace files (*.iot) of an earlier run: "
                         "choose another --trace-dir")


def _run_passing_on_signals(command, env, after_command=None):
    """Run command and return its Popen returncode (-N if signal N ended it), passing
    FORWARDED_SIGNALS on to it; JOB_SIGNALS reach it directly and only wait here. A signal
    ignored when ioassess started keeps being ignored, so that the command inherits that too
    (`nohup`, a background job's SIGINT). after_command() runs once the command ended, before
    the handlers are put back: JOB_SIGNALS then raise KeyboardInterrupt in it (they stop it)."""
    child = None
    pending = []
    ended = False

    def job_signal(_signum, _frame):
        if ended:
            raise KeyboardInterrupt

    def forward(signum, _frame):
        if child is None:
            pending.append(signum)
        else:
            child.send_signal(signum)

    # A handler, not SIG_IGN, for the job signals: the command must not inherit them ignored.
    handlers = {**{signum: forward for signum in FORWARDED_SIGNALS}, **{signum: job_signal for signum in JOB_SIGNALS}}
    restores = [_set_handler(signum, handler) for signum, handler in handlers.items()
                if signal.getsignal(signum) != signal.SIG_IGN]
    try:
        try:
            child = subprocess.Popen(command, env=env)
        except FileNotFoundError:
            raise _NotStarted(f"{command[0]}: command not found", COMMAND_NOT_FOUND) from None
        except OSError as error:
            raise _NotStarted(f"{command[0]}: cannot run: {error.strerror}", COMMAND_NOT_EXECUTABLE) from None
        for signum in pending:
            child.send_signal(signum)
        returncode = child.wait()
        ended = True
        if after_command is not None:
            after_command()
        return returncode
    finally:
        for restore in restores:
            restore()


def _set_handler(signum, handler):
    """Install a Python handler; returns a function that puts back what was there before, also
    a handler that a C library of this process installed, which Python cannot name
    (signal.signal returns None for it: libmpich's UCX installs one for SIGHUP)."""
    before = _sigaction(signum)
    previous = signal.signal(signum, handler)
    if previous is None:
        return functools.partial(_sigaction, signum, before)
    return functools.partial(signal.signal, signum, previous)


def _sigaction(signum, new=None):
    """The signal's action (an opaque copy of its struct sigaction), after setting it to new
    (such a copy) if given."""
    old = ctypes.create_string_buffer(SIGACTION_BYTES)
    if _LIBC.sigaction(signum, new, old) != 0:
        error = ctypes.get_errno()
        raise OSError(error, f"sigaction({signum}): {os.strerror(error)}")
    return old


def _end_by_signal(signum):
    """End ioassess by the signal that ended the command, so that a batch system records that
    signal, as it would without ioassess, not an exit status 128 + N. The command can only have
    died of a signal whose default action ends a process, so the same signal with its default
    action, unblocked, ends this one. Without a core dump: RLIMIT_CORE 0, so that Python's core
    never replaces the command's (a file `core` in the same directory). Returns only if the
    signal did not end this process."""
    sys.stdout.flush()
    sys.stderr.flush()
    resource.setrlimit(resource.RLIMIT_CORE, (0, resource.getrlimit(resource.RLIMIT_CORE)[1]))
    if signum not in (signal.SIGKILL, signal.SIGSTOP):
        signal.signal(signum, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signum})
    signal.raise_signal(signum)
