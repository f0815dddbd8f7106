"""The report of three jobs at the ends of what its charts must draw, opened in headless Chromium
(tests/browser_helpers.py): a 0.5 s job, a 1 h job and a 65,536-rank job known only from
Darshan's counters. Each page loads with no console message, no JavaScript exception and no
request but its own file, shows every section heading of the template, and each chart slot of
the template shows a chart with at least one visible mark (a bar, line, point or cell that is
displayed, not transparent, of nonzero size on the screen, inside its chart's frame) or the
sentence written in its place; no text of a chart is cut off by its edge or overlaps another.

The inputs are real runs and logs:
- 0.5 s: tests/progs/timedio.c under `ioassess run`, making I/O passes over a file until 0.5 s of
  wall time have passed, however fast the machine.
- 1 h: that job's own trace with its run stretched to an hour, nothing sleeping: every instant of
  the process (op starts, clock readings, page-cache samples, its end) moved F times as far from
  its start, F = 1 h over its runtime, and its start moved back so that it ends when it ended;
  each op keeps its duration, size and file, as if the program had computed between its calls.
  Rewritten with the trace format's own dtypes (ioassess/inputs/traceformat.py) and read by the
  trace reader as any trace.
- 65,536 ranks: PyDarshan's sample-badost.darshan (2048 ranks, each writing a file of its own;
  counters only) rewritten by darshan-util's log writer (test_darshan_log.rewritten_log) with
  nprocs 65,536 and its POSIX records repeated for ranks 2048 to 65,535 (rank r's a copy of rank
  r mod 2048's): each file written by 32 ranks.
The 1 h and the 65,536-rank jobs are placed on a site grid measured by `ioassess iomodels`; the
0.5 s job has none (the grid's sentence instead).
"""
import json
import re
import subprocess
import types

import numpy as np
import pytest
from browser_helpers import (browser, chart_problems, chart_slots, console_problems, load,  # noqa: F401
                             measured_site_grid, requests_besides, section_headings, template_chart_slots,
                             template_section_headings)
from conftest import RUN_TIMEOUT_S, _installed_cli
from recorder_helpers import prog
from test_darshan_log import darshan_util, rewritten_log  # noqa: F401

from ioassess.inputs import traceformat as tf

pytestmark = pytest.mark.browser

HALF_SECOND_S = 0.5
HOUR_S = 3600
RANKS = 65536
BADOST_RANKS = 2048
# The chart slots that draw a chart for each job; the others say why they do not.
DRAWN = {"half_second": {"scatter", "timeline", "slowdown", "order_statistics", "per_process"},
         "hour": {"scatter", "timeline", "slowdown", "order_statistics", "per_process", "io_model"},
         "ranks_65536": {"per_process", "io_model"}}


def cli(*args, env=None):
    """The installed CLI run as a user runs it (conftest's _installed_cli); it must succeed."""
    argv, full_env = _installed_cli(args, env)
    result = subprocess.run(argv, cwd="/", env=full_env, capture_output=True, text=True, timeout=RUN_TIMEOUT_S)
    assert result.returncode == 0, result.stderr
    return result


def reported(name, report, assessment, **facts):
    return types.SimpleNamespace(name=name, report=report, assessment=json.loads(assessment.read_text()), **facts)


def stretched_trace(data, seconds):
    """A trace's bytes with its process's run stretched to `seconds` (see the module's doc)."""
    data = bytearray(data)
    header = np.frombuffer(data, tf.HEADER_DTYPE, 1)   # views: what is assigned goes into data
    start_ticks, start_ns = header["start_ticks"][0], header["start_monotonic_ns"][0]
    ran_ns = int(header["end_monotonic_ns"][0] - start_ns)
    factor = np.uint64(round(seconds * 1e9 / ran_ns))

    def stretch(values, origin):
        values[...] = origin + (values - origin) * factor

    header["start_realtime_ns"] -= np.uint64((int(factor) - 1) * ran_ns)
    stretch(header["end_ticks"], start_ticks)
    stretch(header["end_monotonic_ns"], start_ns)
    slots = np.frombuffer(data, np.uint8, (len(data) - tf.HEADER_BYTES) // tf.SLOT_BYTES * tf.SLOT_BYTES,
                          tf.HEADER_BYTES).reshape(-1, tf.SLOT_BYTES)
    kinds = slots[:, 0].copy()
    if header["summary_offset"][0]:   # the summary table's slots are no records
        first = (int(header["summary_offset"][0]) - tf.HEADER_BYTES) // tf.SLOT_BYTES
        kinds[first:first + int(header["summary_entries"][0]) * tf.SUMMARY_ENTRY_DTYPE.itemsize // tf.SLOT_BYTES] = \
            tf.SlotType.EMPTY
    for kind, dtype, origins in ((tf.SlotType.OP, tf.OP_RECORD_DTYPE, {"start_ticks": start_ticks}),
                                 (tf.SlotType.CLOCK, tf.CLOCK_RECORD_DTYPE,
                                  {"ticks": start_ticks, "monotonic_ns": start_ns}),
                                 (tf.SlotType.PAGECACHE, tf.PAGECACHE_RECORD_DTYPE, {"op_start_ticks": start_ticks})):
        chosen = kinds == kind
        records = slots[chosen].view(dtype).ravel()
        for field, origin in origins.items():
            stretch(records[field], origin)
        slots[chosen] = records.view(np.uint8).reshape(-1, tf.SLOT_BYTES)
    return bytes(data)


def every_rank_a_record(raw):
    """sample-badost.darshan's POSIX records (one per rank 0 .. 2047) repeated for every rank of
    RANKS: rank r's record a copy of rank r mod 2048's, in rank order."""
    size = len(raw) // BADOST_RANKS
    records = np.frombuffer(raw, [("id", "<u8"), ("rank", "<i8"), ("counters", f"V{size - 16}")])
    assert len(records) * size == len(raw) and sorted(records["rank"]) == list(range(BADOST_RANKS))
    copies = np.tile(records, RANKS // BADOST_RANKS)
    copies["rank"] += np.repeat(np.arange(0, RANKS, BADOST_RANKS), BADOST_RANKS)
    return copies[np.argsort(copies["rank"], kind="stable")].tobytes()


@pytest.fixture(scope="module")
def site_grid(recorder_lib, tmp_path_factory):
    return measured_site_grid(tmp_path_factory.mktemp("grid"), _installed_cli([], None)[1])


@pytest.fixture(scope="module")
def half_second(recorder_lib, tmp_path_factory):
    base = tmp_path_factory.mktemp("half-second")
    traces = base / "traces"
    ran = cli("run", "--trace-dir", traces, "--", prog("timedio"), base / "data", HALF_SECOND_S)
    passes, elapsed = re.fullmatch(r"passes=(\d+) elapsed=([\d.]+)\n", ran.stdout).groups()
    return reported("half_second", traces / "report.html", traces / "assessment.json", traces=traces,
                    passes=int(passes), elapsed_s=float(elapsed))


@pytest.fixture(scope="module")
def hour(half_second, site_grid, tmp_path_factory):
    base = tmp_path_factory.mktemp("hour")
    (base / "traces").mkdir(mode=0o700)
    (trace,) = half_second.traces.glob("*.iot")   # timedio's: `ioassess run` records only the program
    stretched = base / "traces" / trace.name
    stretched.write_bytes(stretched_trace(trace.read_bytes(), HOUR_S))
    stretched.chmod(0o600)
    cli("report", base / "traces", "-o", base / "report.html", "--json", base / "assessment.json",
        env={"IOASSESS_SITE_GRID": str(site_grid)})
    return reported("hour", base / "report.html", base / "assessment.json")


@pytest.fixture(scope="module")
def ranks_65536(darshan_util, site_grid, tmp_path_factory):  # noqa: F811
    base = tmp_path_factory.mktemp("ranks")
    log = rewritten_log(darshan_util, base / "ranks.darshan", "sample-badost.darshan", job={"nprocs": RANKS},
                        modules={"POSIX": every_rank_a_record})
    cli("report", log, "-o", base / "report.html", "--json", base / "assessment.json",
        env={"IOASSESS_SITE_GRID": str(site_grid)})
    return reported("ranks_65536", base / "report.html", base / "assessment.json")


@pytest.fixture(scope="module", params=list(DRAWN))
def job(request):
    return request.getfixturevalue(request.param)


@pytest.fixture(scope="module")
def page(browser, job):  # noqa: F811
    return load(browser, job.report)


# --- every page ---------------------------------------------------------------------------------

def test_no_console_message_and_no_exception(page):
    assert console_problems(page) == []


def test_no_request_but_the_report_itself(page, job):
    assert requests_besides(page, job.report) == []


def test_every_section_heading_of_the_template_is_shown(page):
    assert section_headings(page) == template_section_headings()


def test_every_chart_draws_a_visible_mark_or_says_why_not(page, job):
    assert chart_problems(page) == []
    shown = chart_slots(page)
    assert set(shown) == set(template_chart_slots())
    # the order statistics need a fitted tail of the slowdowns (over the time if cached, which the
    # job's own cached reads may give) with a finite ratio to draw: without one, the page said why
    # (chart_problems; under stress-ng --cpu 2 the half-second job's had none)
    drawable = any(tail.get("order_statistics") and
                   any(ratio is not None for ratio in tail["order_statistics"]["ratio_to_median"])
                   for tail in job.assessment["tails"].values())
    expected = DRAWN[job.name] - (set() if drawable else {"order_statistics"})
    assert {name for name, what in shown.items() if "chart" in what} == expected


# --- what each job is ---------------------------------------------------------------------------

def test_the_half_second_job_took_half_a_second(half_second):
    """The program's own wall time is at least 0.5 s; the process, from before main to after
    it, a little longer, however loaded the machine."""
    runtime = half_second.assessment["job"]["runtime_s"]
    assert half_second.passes >= 1
    assert HALF_SECOND_S <= half_second.elapsed_s <= runtime < half_second.elapsed_s + 10


def test_the_hour_job_is_the_half_second_jobs_ops_over_an_hour(half_second, hour):
    short, long = half_second.assessment, hour.assessment
    assert long["job"]["runtime_s"] == pytest.approx(HOUR_S, abs=1)
    assert long["job"]["end"] == short["job"]["end"]
    assert sum(row["ops"] for row in long["classes"]) == sum(row["ops"] for row in short["classes"])
    assert long["headline"]["io_s"] == pytest.approx(short["headline"]["io_s"], rel=1e-6)
    # the time axes span the hour: the timeline's bins and at least 20 slowdown intervals
    assert long["timeline"]["bin_s"] * len(long["timeline"]["start_s"]) == pytest.approx(HOUR_S, rel=0.01)
    slowdown = long["slowdown"]
    assert slowdown["interval_count"] >= 20
    assert slowdown["interval_seconds"] * slowdown["interval_count"] >= 0.99 * HOUR_S


def test_the_65536_rank_job_is_every_ranks_counters(ranks_65536):
    a = ranks_65536.assessment
    assert (a["job"]["nprocs"], a["job"]["processes_with_io"], a["tier"]) == (RANKS, RANKS, "counters")
    view = a["per_process"]
    assert (view["unit"], view["count"], view["plot"]["units"]) == ("rank", RANKS, RANKS)
    assert len(view["plot"]["start"]) * view["plot"]["units_per_bin"] >= RANKS > len(view["plot"]["start"])
    assert a["io_model"]["processes_doing_io"] == RANKS and a["site_grid"]["placement"] is not None
