"""The fleet page (`ioassess fleet report`, docs/fleet.md "The fleet page"): a store of real
recorded jobs (one of them with hostile names) and a made-up fleet; the page's numbers are the
named questions' rows, its names are escaped, it links the reports that exist and only those,
an empty store gives a page that says so; and the page as a browser shows it: no console
message, no request beside its own file, charts that draw and do not collide."""
import datetime
import html.parser
import json
import os
import pathlib
import re
import subprocess
import types
from html import escape

import pytest
from browser_helpers import (browser, chart_problems, chart_slots, console_problems, load,  # noqa: F401
                             requests_besides, section_headings)
from conftest import _installed_cli
from test_fleet import recorded_jobs  # noqa: F401  (the module fixture: real jobs run under the recorder)

from ioassess.escape import printable
from ioassess.site.fleet.engine import Filters, connect, run_query
from ioassess.site.fleet.page import node_hours_text, utc_text
from ioassess.site.fleet.record import job_record, keyed
from ioassess.site.fleet.spool import spool_record
from ioassess.site.fleet.store import compact
from ioassess.site.fleet.synthetic import add_synthetic_fleet
from ioassess.site.probe.report import factor_text
from ioassess.units import interval_text, seconds_text, share_text

UTC = datetime.timezone.utc
# The made-up fleet's two months lie years before the recorded jobs: a filter on the end time
# takes one or the other.
SYNTHETIC_MONTHS = (2020, 1)
RECORDED_SINCE = datetime.datetime(2021, 1, 1, tzinfo=UTC)
LATE_SYNTHETIC = datetime.datetime(2020, 2, 20, tzinfo=UTC)
HOSTILE = {"user": "<b>eve</b>\u202e\x1b[2J", "app": "<script>alert(1)</script>",
           "main_fs": '"><svg onload=alert(2)>', "first_finding": "<img src=x onerror=alert(3)>"}
HOSTILE_REPORT_NAME = "\"'><img src=x onerror=alert(4)>&.html"
# (page, the filters of `fleet report` that make it)
PAGES = {"all": [], "late": ["--since", LATE_SYNTHETIC.isoformat()],
         "recorded": ["--since", RECORDED_SINCE.isoformat()]}
SECTIONS = ["Time lost per week", "Jobs that lost most", "Regressions", "Applications", "Users", "File systems",
            "Findings", "Latency"]


@pytest.fixture(scope="module")
def store(recorded_jobs, tmp_path_factory):  # noqa: F811
    """The recorded jobs' records (reports: one beside its traces, one by a name relative to the
    store, one missing, one never written; a copy of the first with hostile names whose report
    has a hostile name) and 2,000 made-up jobs: .path the store, .reports {job key: its
    report's path if it exists, else None} of the recorded jobs."""
    store = tmp_path_factory.mktemp("fleet-page-store")
    (store / "reports").mkdir()
    relative = pathlib.Path("reports") / "job1.html"
    (store / relative).write_text("<p>report</p>")
    hostile_report = store / "reports" / HOSTILE_REPORT_NAME
    hostile_report.write_text("<p>report</p>")
    reports = [(str(recorded_jobs[0][1] / "report.html"), recorded_jobs[0][1] / "report.html"),
               (str(relative), store / relative), (str(store / "missing.html"), None), ("", None)]
    records = [job_record(assessment, user=user, report=report, source=str(trace_dir))
               for (user, trace_dir, assessment), (report, _) in zip(recorded_jobs, reports)]
    # a week before the first, it lost time: its file system's name is in the time-lost chart's legend
    hostile = json.loads(json.dumps(records[0]))
    end = datetime.datetime.fromtimestamp(hostile["job"]["end"] / 1e6, UTC) - datetime.timedelta(weeks=1)
    hostile["job"].update(HOSTILE, report=str(hostile_report), io_s=20.0, lost_low_s=12.0, lost_high_s=12.5,
                          end=round(end.timestamp() * 1e6), month=f"{end:%Y-%m}")
    records.append(keyed(hostile))
    for record in records:
        spool_record(str(store), record)
    assert compact(str(store))["added"] == len(records)
    add_synthetic_fleet(str(store), 2000, seed=3, first_month=SYNTHETIC_MONTHS, months=2)
    existing = [path for _, path in reports] + [hostile_report]
    assert all(path is None or path.is_file() for path in existing)
    return types.SimpleNamespace(path=store, reports={record["job"]["job_key"]: path
                                                      for record, path in zip(records, existing)})


def fleet_report(store, output, *arguments):
    """`ioassess fleet report` run as a user runs it (a CompletedProcess)."""
    argv, env = _installed_cli(["fleet", "report", "--store", store, "-o", output, *arguments], None)
    return subprocess.run(argv, cwd="/", env=env, capture_output=True, text=True, timeout=300)


@pytest.fixture(scope="module")
def pages(store, tmp_path_factory):
    """{page: (its path, the time before and after it was made)} of PAGES and of an empty store."""
    base = tmp_path_factory.mktemp("fleet-pages")
    (base / "empty-store").mkdir()
    made = {}
    for name, arguments in [*PAGES.items(), ("empty", None)]:
        started = datetime.datetime.now(UTC)
        result = fleet_report(base / "empty-store" if arguments is None else store.path, base / f"{name}.html",
                              *(arguments or []))
        assert result.returncode == 0, result.stderr
        made[name] = (base / f"{name}.html", started, datetime.datetime.now(UTC))
    return made


class PageTables(html.parser.HTMLParser):
    """The tables of a page by id: their rows of data (not the heading row, nor the row that
    says there is none), each a list of (cell text, the href of a link in it or None)."""

    def __init__(self, text):
        super().__init__()
        self.tables, self.table, self.row, self.cell = {}, None, None, None
        self.feed(text)

    def handle_starttag(self, tag, attributes):
        attributes = dict(attributes)
        if tag == "table":
            self.table = self.tables.setdefault(attributes.get("id"), [])
        elif tag == "tr":
            self.row = [] if attributes.get("class") != "none" else None
        elif tag in ("td", "th"):
            self.cell = [tag, "", None]
        elif tag == "a" and self.cell:
            self.cell[2] = attributes["href"]

    def handle_data(self, data):
        if self.cell:
            self.cell[1] += data

    def handle_endtag(self, tag):
        if tag in ("td", "th"):
            if self.row is not None:
                self.row.append(self.cell)
            self.cell = None
        elif tag == "tr":
            if self.row and self.row[0][0] == "td":
                self.table.append([(text, href) for _, text, href in self.row])
            self.row = None


def _name(value):
    return printable(value) if value else "unknown"


def _report_cell(row):
    return "report" if row["link"] else "not found" if row["report"] else "–"


def _grouped(key):
    return lambda r: [_name(r[key]), str(r["jobs"]), seconds_text(r["io_s"]), seconds_text(r["lost_high_s"]),
                      seconds_text(r["median_lost_s"]), node_hours_text(r["node_seconds"]), printable(r["worst_job"]),
                      seconds_text(r["worst_lost_s"])]


# Per table of the page: its question, and the cell texts of a row of its answer.
TABLES = {
    "trend-table": ("trend", lambda r: [r["week"].strftime("%Y-%m-%d"), _name(r["main_fs"]), str(r["jobs"]),
                                        seconds_text(r["io_s"]), seconds_text(r["lost_high_s"]),
                                        share_text(r["lost_share"]), factor_text(r["probe_slowdown_median"]),
                                        factor_text(r["probe_slowdown_p90"])]),
    "top-lost-table": ("top-lost", lambda r: [
        printable(r["job_key"]), printable(r["user"]), printable(r["app"]), utc_text(r["end"]),
        seconds_text(r["runtime_s"]), seconds_text(r["io_s"]), interval_text(r["lost_low_s"], r["lost_high_s"]),
        printable(r["main_cause"]),
        printable(r["first_finding"]), seconds_text(r["at_stake_s"]), printable(r["main_fs"]), _report_cell(r)]),
    "regressions-table": ("regressions", lambda r: [
        printable(r["job_key"]), printable(r["app"]), utc_text(r["end"]), seconds_text(r["lost_high_s"]),
        seconds_text(r["history_median"]), seconds_text(r["history_iqr"])]),
    "by-app-table": ("by-app", _grouped("app")),
    "by-user-table": ("by-user", _grouped("user")),
    "by-fs-table": ("by-fs", _grouped("main_fs")),
    "findings-table": ("findings", lambda r: [printable(r["finding"]) if r["finding"] != r["title"] else "–",
                                              printable(r["title"]), str(r["fired"]), str(r["jobs"]),
                                              seconds_text(r["at_stake_s"]), seconds_text(r["largest_at_stake_s"])]),
    "latency-table": ("latency", lambda r: [r["kind"], printable(r["mount_point"]), r["fs_type"], str(r["ops"]),
                                            *(seconds_text(r[f"p{p}_s"]) for p in ("50", "90", "99", "999"))]),
}


def _answer(store, name, filters):
    """The question's rows as {column: value}, the top jobs with the link the page must give."""
    connection = connect(str(store.path))
    columns, rows = run_query(connection, name, filters)
    connection.close()
    rows = [dict(zip(columns, row)) for row in rows]
    if name == "top-lost":
        rows = [{**row, "link": store.reports[row["job_key"]].as_uri() if store.reports.get(row["job_key"]) else None}
                for row in rows]
    return rows


def _page_filters(arguments):
    return Filters(since=datetime.datetime.fromisoformat(arguments[1])) if arguments else Filters()


@pytest.mark.parametrize("page", list(PAGES))
def test_the_pages_numbers_are_the_named_questions_rows(store, pages, page):
    path, started, ended = pages[page]
    text = path.read_text()
    tables = PageTables(text).tables
    filters = _page_filters(PAGES[page])
    for table, (question, cells) in TABLES.items():
        rows = _answer(store, question, filters)
        assert [[cell for cell, _ in row] for row in tables[table]] == [cells(row) for row in rows], (page, table)
        assert rows or question == "regressions", (page, question)   # every section shows something
    # the totals above the tables are the trend rows' sums
    trend = _answer(store, "trend", filters)
    assert f'<div class="value">{sum(r["jobs"] for r in trend)}</div>' in text
    assert f'<div class="value">{seconds_text(sum(r["lost_high_s"] for r in trend))}</div>' in text
    # the page says what it is of: the store, the filters, when it was made
    about = re.search(r'<p class="note" id="about">(.*?)</p>', text).group(1)
    assert str(store.path) in about
    assert ("jobs ended at or after " + utc_text(filters.since) if filters.since else "all jobs") in about
    made = datetime.datetime.strptime(re.search(r"made (\S+ \S+) UTC", about).group(1), "%Y-%m-%d %H:%M")
    assert started.replace(second=0, microsecond=0, tzinfo=None) <= made <= ended.replace(tzinfo=None)


def test_the_late_page_shows_regressions(store, pages):
    """The made-up fleet's last weeks have runs far above their application's history: the
    regressions section is not empty there (so the comparison above compares rows)."""
    assert _answer(store, "regressions", _page_filters(PAGES["late"]))
    assert PageTables(pages["late"][0].read_text()).tables["regressions-table"]


def test_hostile_names_are_text_and_only_existing_reports_are_linked(store, pages):
    text = pages["recorded"][0].read_text()
    for value in [*HOSTILE.values(), HOSTILE_REPORT_NAME]:
        assert value not in text
    for marker in ("<script", "<svg onload", "<img", "<b>eve"):
        assert marker not in text
    rows = PageTables(text).tables["top-lost-table"]
    assert len(rows) == len(store.reports)   # only the recorded jobs, each once
    hostile_row = next(row for row in rows if row[2][0] == HOSTILE["app"])
    assert hostile_row == rows[0]   # it lost most
    assert escape(HOSTILE["main_fs"]) in text   # the time-lost chart's legend (svg.py's escape, not Jinja2's)
    assert hostile_row[1][0] == printable(HOSTILE["user"]) and "\\u202e\\x1b[2J" in hostile_row[1][0]
    links = {row[0][0]: row[-1][1] for row in rows}
    assert links == {key: path.as_uri() if path else None for key, path in store.reports.items()}
    assert sum(1 for href in links.values() if href) == 3   # beside its traces, relative to the store, hostile


def test_an_empty_store_and_filters_that_choose_nothing_give_a_page_that_says_so(store, pages, tmp_path):
    nothing = tmp_path / "nothing.html"
    result = fleet_report(store.path, nothing, "--user", "nobody")
    assert result.returncode == 0, result.stderr
    for path, words in ((pages["empty"][0], "the store holds no job, so"),
                        (nothing, "the store holds no job that the filters choose")):
        text = path.read_text()
        assert words in text and "<table" not in text and "<svg" not in text
        body = text.split("<body>", 1)[1]
        assert not re.search(r"\bnan\b|\bnone\b|\binf\b", body, flags=re.I), body


def test_the_command_writes_a_page_only_its_owner_reads_and_says_what_is_wrong_in_one_line(store, pages, tmp_path):
    assert all(os.stat(path).st_mode & 0o777 == 0o600 for path, _, _ in pages.values())
    page = tmp_path / "fleet.html"
    page.write_text("an earlier page")
    result = fleet_report(tmp_path / "none", page)
    assert result.returncode == 2 and result.stderr.count("\n") == 1 and "no such store" in result.stderr
    assert page.read_text() == "an earlier page"
    result = fleet_report(store.path, tmp_path / "no-such-directory" / "fleet.html")
    assert result.returncode == 2 and result.stderr.count("\n") == 1 and "No such file" in result.stderr
    argv, env = _installed_cli(["fleet", "report", "-o", page], None)
    result = subprocess.run(argv, cwd="/", env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 2 and "--store" in result.stderr
    result = fleet_report(store.path, page)
    assert result.returncode == 0 and result.stderr == f"ioassess: wrote {page}\n"
    assert os.listdir(tmp_path) == ["fleet.html"]   # no temporary file left beside it


@pytest.mark.browser
@pytest.mark.parametrize("page", [*PAGES, "empty"])
def test_the_page_in_a_browser_loads_alone_quietly_and_its_charts_draw_without_collisions(browser, store,  # noqa: F811
                                                                                           pages, page):
    path = pages[page][0]
    shown = load(browser, path)
    assert console_problems(shown) == []
    assert requests_besides(shown, path) == []
    assert not shown.events_named("Page.javascriptDialogOpening")
    assert chart_problems(shown) == []
    if page == "empty":
        assert section_headings(shown) == [] and chart_slots(shown) == {}
        return
    assert section_headings(shown) == SECTIONS
    # the made-up jobs have the probe's slowdown, the recorded ones ran with no probe
    assert chart_slots(shown) == {"lost_per_week": {"chart"},
                                  "probe_slowdown": {"sentence" if page == "recorded" else "chart"}}
