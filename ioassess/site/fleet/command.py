"""The `ioassess fleet compact|ingest|query|sql|report` command lines (docs/fleet.md, docs/cli.md)."""
import argparse
import csv
import datetime
import importlib.util
import json
import os
import sys

from ...escape import printable
from ...progress import Progress
from .queries import ENGINES, QUERIES

USAGE_ERROR = 2
STORE_ENV = "IOASSESS_FLEET_STORE"


def add_commands(commands):
    fleet = commands.add_parser("fleet", help="every job's assessment in one store, and questions across jobs "
                                              "(for admins)",
                                description="The site's store of job records (Parquet, by month) and the named "
                                            "questions across jobs (docs/fleet.md).")
    actions = fleet.add_subparsers(metavar="ACTION")
    fleet.set_defaults(handler=lambda _args: fleet.print_help(sys.stderr) or USAGE_ERROR)

    def action(name, help, description):
        parser = actions.add_parser(name, help=help, description=description)
        parser.add_argument("--store", metavar="DIR", help=f"the store (default: ${STORE_ENV})")
        return parser

    compact = action("compact", "turn the spooled job records into Parquet (cron, scrontab)",
                     "Take every record the job ends spooled into STORE/spool into the store's tables; "
                     "safe to run twice at once or after a crash.")
    compact.set_defaults(handler=_compact)
    ingest = action("ingest", "add a site's history: assessment JSON files, Darshan logs, trace directories",
                    "Assess each input in parallel processes and add it to the store; inputs already there are "
                    "skipped, so an interrupted run is taken up again by running it again.")
    ingest.add_argument("paths", nargs="+", metavar="PATH", help="a file, or a directory searched for them")
    ingest.add_argument("--processes", type=int, metavar="N", help="worker processes (default: one per core)")
    ingest.set_defaults(handler=_ingest)
    query = action("query", "a named question across jobs", "Named questions: " + "; ".join(
        f"{q.name}: {q.help}" for q in QUERIES.values()) + ".")
    query.add_argument("name", choices=list(QUERIES), metavar="NAME", help=", ".join(QUERIES))
    query.add_argument("argument", nargs="?", metavar="JOB", help="the job key, for `job` (e.g. 1234 or 1234.0)")
    _add_filters(query)
    query.add_argument("--format", choices=("table", "csv", "json"), default="table")
    query.add_argument("--engine", choices=ENGINES, default="duckdb",
                       help="DuckDB on this node (default), or Spark (pyspark; Java 17)")
    query.add_argument("--master", metavar="URL",
                       help="Spark's master (default: local mode on this node's cores), e.g. spark://host:7077")
    query.set_defaults(handler=_query)
    sql = action("sql", "any SQL on the views jobs, findings, files, latency", "Run one SQL statement (DuckDB) on "
                 "the store's views and print its rows.")
    sql.add_argument("statement", metavar="SQL")
    sql.add_argument("--format", choices=("table", "csv", "json"), default="table")
    sql.set_defaults(handler=_sql)
    report = action("report", "one HTML page of the named questions, for admins",
                    "Write one offline HTML page (no script, no external resource) of the jobs the filters choose: "
                    "time lost per week beside the probe's slowdown, the jobs that lost most with links to their "
                    "reports, regressions, applications, users, file systems, findings and latency.")
    report.add_argument("-o", "--output", metavar="FLEET.html", default="fleet.html",
                        help="the page to write (default: fleet.html; mode 0600)")
    _add_filters(report)
    report.set_defaults(handler=_report)
    return fleet


def _add_filters(parser):
    parser.add_argument("--since", type=_time, metavar="TIME", help="jobs that ended at or after (ISO 8601, UTC)")
    parser.add_argument("--until", type=_time, metavar="TIME", help="jobs that ended before (ISO 8601, UTC)")
    parser.add_argument("--user", help="only this user's jobs")
    parser.add_argument("--app", help="only this application's (executable name) jobs")
    parser.add_argument("--fs", metavar="MOUNT", help="only jobs with I/O on this mount point")


def _filters(args):
    from .engine import Filters
    return Filters(since=args.since, until=args.until, user=args.user, app=args.app, fs=args.fs)


def _time(text):
    try:
        moment = datetime.datetime.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{printable(text)!r} is not an ISO 8601 time") from None
    return moment if moment.tzinfo else moment.replace(tzinfo=datetime.timezone.utc)


def _store(args):
    store = args.store or os.environ.get(STORE_ENV)
    if not store:
        raise _UsageError(f"fleet: which store? give --store DIR or set ${STORE_ENV}")
    return store


class _UsageError(Exception):
    pass


def _needs(*modules):
    missing = [name for name in modules if importlib.util.find_spec(name) is None]
    if missing:
        raise _UsageError(f"fleet needs {' and '.join(missing)}: pip install {' '.join(missing)}")


def _run(handler):
    """The handler's exit status; a usage or store problem is one line and status 2."""
    def run(args):
        from .store import StoreError
        try:
            _needs("pyarrow", "duckdb")
            return handler(args)
        except (_UsageError, StoreError) as error:
            print(f"ioassess: {printable(str(error))}", file=sys.stderr)
            return USAGE_ERROR
    return run


@_run
def _compact(args):
    from .store import compact
    counts = compact(_store(args))
    if counts is None:
        print("ioassess: another compaction holds the store: it takes what is spooled", file=sys.stderr)
        return 0
    print(f"added {counts['added']}, duplicates {counts['duplicates']}, rejected {counts['rejected']}, "
          f"months merged {counts['merged']}", file=sys.stderr)
    return 0


@_run
def _ingest(args):
    from .ingest import ingest
    store = _store(args)
    os.makedirs(store, mode=0o750, exist_ok=True)

    bar = None

    def progress(done, total):
        nonlocal bar
        if sys.stderr.isatty():   # a bar on a terminal only: a log of cron or Slurm gets the summary line
            bar = bar or Progress(total, sys.stderr)
            bar.advance(1, f"{done}/{total} inputs")
    counts = ingest(store, args.paths, args.processes, progress)
    print(f"inputs {counts['inputs']}: skipped {counts['skipped']} already in the store, added {counts['added']}, "
          f"rejected {counts['rejected']} (the rejects table says why)", file=sys.stderr)
    return 0


@_run
def _query(args):
    from .engine import connect, run_query
    if QUERIES[args.name].takes_argument != (args.argument is not None):
        raise _UsageError(f"fleet query {args.name}: " + ("give the job key" if QUERIES[args.name].takes_argument
                                                           else "takes no argument"))
    if args.engine == "spark":
        _needs("pyspark")
    columns, rows = run_query(connect(_store(args), args.engine, args.master), args.name, _filters(args),
                              args.argument)
    write_rows(columns, rows, args.format, sys.stdout)
    return 0


@_run
def _sql(args):
    from .engine import connect
    engine = connect(_store(args))
    try:
        columns, rows = engine.run(args.statement)
    except engine.error as error:
        raise _UsageError(f"fleet sql: {str(error).splitlines()[0]}") from None
    write_rows(columns, rows, args.format, sys.stdout)
    return 0


@_run
def _report(args):
    from .page import write_fleet_page
    write_fleet_page(args.output, _store(args), _filters(args))
    print(f"ioassess: wrote {printable(args.output)}", file=sys.stderr)
    return 0


def write_rows(columns, rows, form, stream):
    """The rows as JSON (control characters escaped by JSON), CSV or an aligned table; the
    strings of CSV and table with their control characters escaped (a job's names are its
    user's and may reach a terminal)."""
    if form == "json":
        json.dump([dict(zip(columns, map(_plain, row))) for row in rows], stream, indent=1)
        stream.write("\n")
    elif form == "csv":
        writer = csv.writer(stream)
        writer.writerow(columns)
        writer.writerows([_escaped(_plain(value)) for value in row] for row in rows)
    else:
        cells = [columns] + [[printable(_cell(value)) for value in row] for row in rows]
        widths = [max(len(line[i]) for line in cells) for i in range(len(columns))]
        for line in cells:
            stream.write("  ".join(text.ljust(width) for text, width in zip(line, widths)).rstrip() + "\n")


def _escaped(value):
    return printable(value) if isinstance(value, str) else value


def _plain(value):
    if isinstance(value, (datetime.datetime, datetime.date)):
        return value.isoformat()
    return value


def _cell(value):
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, datetime.datetime):
        return value.strftime("%Y-%m-%d %H:%M")
    return str(value)
