"""The fleet page (`ioassess fleet report`, docs/fleet.md "The fleet page"): one offline HTML page
for admins, in the job report's style (inline SVG charts of report/svg.py, no script, no external
resource), of the named questions (queries.py) on the store with the command line's filters.
The answers first (answers), then the page's data (page_data), then the template
(templates/fleet.html.j2)."""
import datetime
import os
import pathlib
import typing

import markupsafe

from ...escape import printable
from ...html import write_page
from ...report import render, svg
from ...units import NO_VALUE, interval_text
from ..probe.report import factor_text
from .engine import Filters, connect, run_query
from .queries import HISTORY_RUNS, LIMIT, REGRESSION_DAYS, REGRESSION_IQRS, REGRESSION_MIN_RISE

TEMPLATE_DIR = os.path.join(os.path.dirname(os.path.dirname(__file__)), "templates")
PAGE_QUESTIONS = ("trend", "top-lost", "regressions", "by-app", "by-user", "by-fs", "findings", "latency")
WEEK_S = 7 * 86400
# The file systems that lost most each get a line of their own colour, all together a black one.
FILE_SYSTEM_COLOURS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2")
ALL_COLOUR = "#222222"
ALL_FILE_SYSTEMS = object()
UNKNOWN_FS = "unknown"
LEGEND_NAME_CHARS = 32


def answers(engine, filters):
    """{question: [row as {column: value}]} of the page's named questions."""
    found = {}
    for name in PAGE_QUESTIONS:
        columns, rows = run_query(engine, name, filters)
        found[name] = [dict(zip(columns, row)) for row in rows]
    return found


def filters_text(filters):
    """The filters in words: "all jobs", or what each one given keeps."""
    parts = []
    if filters.since:
        parts.append(f"ended at or after {utc_text(filters.since)}")
    if filters.until:
        parts.append(f"ended before {utc_text(filters.until)}")
    for what, value in (("of user", filters.user), ("of application", filters.app),
                        ("with I/O on", filters.fs)):
        if value is not None:
            parts.append(f"{what} {printable(value)}")
    return "jobs " + ", ".join(parts) if parts else "all jobs"


def utc_text(moment):
    return NO_VALUE if moment is None else moment.astimezone(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")


def name_text(value):
    """A name from a job's record (its user's to choose): with its control characters escaped."""
    return NO_VALUE if value is None else printable(value)


def node_hours_text(node_seconds):
    if node_seconds is None:
        return NO_VALUE
    hours = node_seconds / 3600
    return f"{hours:,.0f} node-hours" if hours >= 10 else f"{hours:.2g} node-hours"


def report_link(report, store):
    """A file: URL of the job's report when `report` names a file that exists (a relative name
    is taken from the store's directory), else None."""
    if not report:
        return None
    path = os.path.abspath(os.path.join(store, report))
    return pathlib.Path(path).as_uri() if os.path.isfile(path) else None


def week_number(week, first):
    return round((week - first).total_seconds() / WEEK_S)


class WeekAxis(typing.NamedTuple):
    first: datetime.datetime   # the first week's Monday
    weeks: int                 # from the first week to the last
    days: list                 # each week's place on a chart's x axis: days from the first Monday to its
    label: str


def week_axis(trend):
    """The WeekAxis of the trend rows, or None for fewer than two weeks: a chart over time would
    be a point."""
    if len({row["week"] for row in trend}) < 2:
        return None
    first = min(row["week"] for row in trend)
    weeks = 1 + max(week_number(row["week"], first) for row in trend)
    return WeekAxis(first, weeks, list(range(0, 7 * weeks, 7)), f"days since Monday {first:%Y-%m-%d} (UTC)")


def weekly(trend, column, axis, fs=ALL_FILE_SYSTEMS):
    """The column per week of the axis, of one main file system (the value of its row) or of all
    (the rows' values summed); None in a week without a value."""
    values = [None] * axis.weeks
    for row in trend:
        if (fs is ALL_FILE_SYSTEMS or row["main_fs"] == fs) and row[column] is not None:
            number = week_number(row["week"], axis.first)
            values[number] = (values[number] or 0.0) + row[column]
    return values


def file_system_name(main_fs):
    """A file system's name in a chart's legend: escaped, and cut short."""
    if not main_fs:
        return UNKNOWN_FS
    name = printable(main_fs)
    return name if len(name) <= LEGEND_NAME_CHARS else name[:LEGEND_NAME_CHARS - 1] + "…"


def drawn_file_systems(trend):
    """The main file systems of the trend rows that lost most, as many as have a colour of their
    own, most lost first."""
    lost = {}
    for row in trend:
        lost[row["main_fs"]] = lost.get(row["main_fs"], 0.0) + (row["lost_high_s"] or 0.0)
    return sorted(lost, key=lambda fs: (-lost[fs], fs or ""))[:len(FILE_SYSTEM_COLOURS)]


def lost_per_week_plot(trend):
    """Time lost per week on each main file system that lost most, and on all together when
    there are several; None when no week lost any."""
    axis = week_axis(trend)
    if axis is None:
        return None
    series = [(file_system_name(fs), colour, False, axis.days, weekly(trend, "lost_high_s", axis, fs))
              for fs, colour in zip(drawn_file_systems(trend), FILE_SYSTEM_COLOURS)]
    if len({row["main_fs"] for row in trend}) > 1:
        series.insert(0, ("all file systems", ALL_COLOUR, False, axis.days, weekly(trend, "lost_high_s", axis)))
    plot = svg.line_plot("time lost per week (process-seconds)", axis.label, "time lost (s)", series,
                         "time lost compared with cached I/O per week, by main file system")
    return markupsafe.Markup(plot) if plot else None


def probe_slowdown_plot(trend):
    """The probe's median (solid) and 90th percentile (dashed) slowdown of each week's jobs per
    main file system (those that lost most); None without probe data."""
    axis = week_axis(trend)
    if axis is None:
        return None
    series = [(f"{file_system_name(fs)} {name}", colour, dashed, axis.days, weekly(trend, column, axis, fs))
              for fs, colour in zip(drawn_file_systems(trend), FILE_SYSTEM_COLOURS)
              for column, name, dashed in (("probe_slowdown_median", "median", False),
                                           ("probe_slowdown_p90", "p90", True))]
    plot = svg.line_plot("the probe's slowdown of the week's jobs", axis.label, "slowdown", series,
                         "the probe's median and 90th percentile slowdown of each week's jobs, by main file system",
                         height=300)
    return markupsafe.Markup(plot) if plot else None


def totals(trend):
    """Jobs, I/O time and time lost of the trend rows together, and the share lost."""
    io_s = sum(row["io_s"] or 0.0 for row in trend)
    lost_s = sum(row["lost_high_s"] or 0.0 for row in trend)
    return {"jobs": sum(row["jobs"] for row in trend), "weeks": len({row["week"] for row in trend}), "io_s": io_s,
            "lost_high_s": lost_s, "lost_share": lost_s / io_s if io_s else None}


def page_data(found, store, filters, made):
    """What the template shows: the questions' rows (the top jobs with a link to their report
    where it exists), the charts, the totals, and what the page is of."""
    trend = found["trend"]
    top = [{**row, "link": report_link(row["report"], store)} for row in found["top-lost"]]
    return {"q": {**found, "top-lost": top}, "store": os.path.abspath(store), "filters": filters_text(filters),
            "made": utc_text(made), "empty": not found["by-fs"], "totals": totals(trend),
            "file_systems_drawn": len(drawn_file_systems(trend)),
            "file_systems": len({row["main_fs"] for row in trend}),
            "probe_data": any(row["probe_slowdown_median"] is not None for row in trend),
            "plots": {"lost_per_week": lost_per_week_plot(trend), "probe_slowdown": probe_slowdown_plot(trend)},
            "interval": interval_text, "limit": LIMIT, "filters_since": filters.since is not None,
            "history_runs": HISTORY_RUNS, "regression_iqrs": REGRESSION_IQRS,
            "regression_min_rise": REGRESSION_MIN_RISE, "regression_days": REGRESSION_DAYS}


FILTERS = {**render.FILTERS, "name": name_text, "utc": utc_text, "factor": factor_text,
           "node_hours": node_hours_text}


def write_fleet_page(path, store, filters=Filters(), made=None, mode=0o600):
    """The fleet page of the store's jobs that the filters choose, at path (written whole or not
    at all, with mode); made: the time it says it was made (default now)."""
    engine = connect(store)
    try:
        found = answers(engine, filters)
    finally:
        engine.close()
    data = page_data(found, store, filters, made or datetime.datetime.now(datetime.timezone.utc))
    write_page(path, TEMPLATE_DIR, "fleet.html.j2", data, FILTERS, mode)
