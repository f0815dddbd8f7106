"""The `ioassess probe run|report` command lines (docs/probe.md, docs/cli.md)."""
import dataclasses
import os
import sys
import time

from ...escape import printable
from ..iomodels import parse_size
from .config import (DEFAULT_DATA_SIZE, DEFAULT_DB, DEFAULT_POOL_FILES, ProbeConfigError, ProbeSettings, Target,
                     parse_interval, read_config)
from .store import DAMAGED_STORE_ERRORS, StoreError, not_a_store

USAGE_ERROR = 2
# `probe report` reads the store for at most this long (a job's report: store.READ_TIME_LIMIT_S).
REPORT_TIME_LIMIT_S = 30.0


def add_commands(commands):
    probe = commands.add_parser("probe", help="probe file systems and report their slowdown (for admins)",
                                description="A light periodic probe of file systems (Kunkel & Betke 2019) with "
                                            "its history in SQLite, and reports of its slowdown (docs/probe.md).")
    actions = probe.add_subparsers(metavar="ACTION")
    probe.set_defaults(handler=lambda _args: probe.print_help(sys.stderr) or USAGE_ERROR)
    run = actions.add_parser("run", help="probe until SIGTERM or SIGINT",
                             description="Every interval, time a random 1 MiB and 4 KiB read and write and a "
                                         "small file's create, stat, read and delete in each target, and keep "
                                         "every op in the store.")
    source = run.add_mutually_exclusive_group(required=True)
    source.add_argument("--config", metavar="FILE", help="the store settings and targets ([probe], [target NAME])")
    source.add_argument("--dir", metavar="DIR", action="append",
                        help="a directory of a file system to probe (repeatable; its name is the directory)")
    run.add_argument("--db", metavar="PATH", help=f"the store (default: the config's, else {DEFAULT_DB})")
    run.add_argument("--interval", metavar="TIME", type=parse_interval,
                     help="time between rounds: 1s, 500ms, 1m (default: the config's, else 1s)")
    run.add_argument("--data-size", metavar="SIZE", type=parse_size, default=DEFAULT_DATA_SIZE,
                     help="the data file of each --dir (default: 1G)")
    run.add_argument("--pool-files", metavar="N", type=int, default=DEFAULT_POOL_FILES,
                     help=f"the small files of each --dir (default: {DEFAULT_POOL_FILES})")
    run.add_argument("--rounds", metavar="N", type=int, help="stop after N rounds (default: never)")
    run.add_argument("--metrics-port", metavar="PORT", type=int,
                     help="serve Prometheus metrics on this port (default: the config's, else none)")
    run.add_argument("--metrics-address", metavar="ADDRESS",
                     help="the address the metrics are served on, e.g. 0.0.0.0 for every one (default: the "
                          "config's, else 127.0.0.1)")
    run.add_argument("--cleanup", action="store_true", help="remove the probe's files in the targets and exit")
    run.set_defaults(handler=_run)
    report = actions.add_parser("report", help="the slowdown of the probed file systems over a window",
                                description="Write the probe's slowdown per interval and op (median, p90, p95, "
                                            "p99 of observed / normal) over a window as HTML and/or JSON.")
    report.add_argument("--db", metavar="PATH", default=DEFAULT_DB, help=f"the store (default: {DEFAULT_DB})")
    report.add_argument("--since", metavar="TIME", default="1d",
                        help="the window's start: 2h, 30d (before now), ISO 8601 (local time) or seconds since the "
                             "epoch (default: 1d)")
    report.add_argument("--until", metavar="TIME", default="now", help="the window's end (default: now)")
    report.add_argument("--interval", metavar="TIME", type=parse_interval,
                        help="the interval width, e.g. 60s, 10m, 4h (default: about 50 intervals)")
    report.add_argument("--normal-days", metavar="DAYS", type=float, default=30.0,
                        help="the normal of an op is its median over this many days before the window's end "
                             "(default: 30)")
    report.add_argument("--target", metavar="NAME", action="append", help="only this target (repeatable)")
    report.add_argument("-o", "--output", metavar="PROBE.html", help="the HTML report (default: probe.html "
                                                                     "unless --json is given)")
    report.add_argument("--json", metavar="PROBE.json", help="the same data as JSON")
    report.set_defaults(handler=_report)
    return probe


def settings_of(args):
    """ProbeSettings: the config file's (or --dir's targets), overridden by the options given."""
    if args.config:
        settings = read_config(args.config)
    else:
        if args.pool_files < 1:
            raise ProbeConfigError(f"--pool-files {args.pool_files}: needs 1 or more")
        targets = tuple(Target(os.path.abspath(directory), os.path.abspath(directory), args.data_size,
                               args.pool_files) for directory in dict.fromkeys(args.dir))
        settings = ProbeSettings(targets=targets)
    given = {"db": args.db, "interval": args.interval, "metrics_port": args.metrics_port,
             "metrics_address": args.metrics_address}
    return dataclasses.replace(settings, **{name: value for name, value in given.items() if value is not None})


def _run(args):
    from .metrics import Exporter, MetricsUnavailable
    from .run import cleanup, run_probe
    from .target import TargetUnusable
    try:
        settings = settings_of(args)
        if args.cleanup:
            return cleanup(settings)
        metrics = Exporter(settings.metrics_address, settings.metrics_port, settings.normal_days) \
            if settings.metrics_port else None
    except (ProbeConfigError, MetricsUnavailable) as error:
        return _usage_error(str(error))
    try:
        return run_probe(settings, args.rounds, metrics=metrics)
    except (StoreError, TargetUnusable) as error:
        return _usage_error(str(error))
    finally:
        if metrics is not None:
            metrics.close()


def _report(args):
    from .report import parse_time, probe_report_data, write_html, write_json
    from .store import Store
    now = time.time()
    try:
        since, until = parse_time(args.since, now), parse_time(args.until, now)
        if not since < until:
            raise ValueError(f"--since {args.since} is not before --until {args.until}")
        if not 0 < args.normal_days < float("inf"):
            raise ValueError(f"--normal-days {args.normal_days}: must be more than 0")
        store = Store(args.db, time_limit_s=REPORT_TIME_LIMIT_S)
        unknown = sorted(set(args.target or ()) - set(store.targets()))
        if unknown:
            raise ValueError(f"{args.db}: no target {', '.join(unknown)} (it has: {', '.join(store.targets())})")
    except (ValueError, StoreError) as error:
        return _usage_error(str(error))
    try:
        data = probe_report_data(store, since, until, args.interval, args.normal_days, args.target)
    except StoreError as error:
        return _usage_error(str(error))
    except DAMAGED_STORE_ERRORS as error:
        return _usage_error(not_a_store(args.db, error))
    finally:
        store.close()
    written = []
    if args.json:
        write_json(args.json, data)
        written.append(args.json)
    if args.output or not args.json:
        write_html(args.output or "probe.html", data)
        written.append(args.output or "probe.html")
    print(f"ioassess: wrote {' and '.join(written)}", file=sys.stderr)
    return 0


def _usage_error(message):
    print(f"ioassess: {printable(message)}", file=sys.stderr)
    return USAGE_ERROR
