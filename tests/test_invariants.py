"""One account of the job's time (report/stakes.py, report/invariants.py): seconds at stake in
wall-clock time, levels that follow them, and the rules every assessment keeps.

- heaviest_chain and WallClock on spans made here: processes side by side save at once (the
  largest saving), processes one after the other add theirs, each at most its span, all at most
  the run time; a shared record's part is its slowest rank's;
- every shipped Darshan log's assessment keeps every rule, and `ioassess report --check` says so;
- each rule, broken in a real assessment, is named by `violations`;
- a script of two commands reading one after the other (a real run under the recorder): the
  small-reads finding's wall-clock stake is the two commands' savings added, each named with its
  own part.
"""
import copy
import json
import math
import os

import numpy as np
import pytest

from recorder_helpers import shipped_darshan_logs
from ioassess.report import assess, load_and_choose
from ioassess.report.invariants import violations
from ioassess.report.stakes import WallClock, heaviest_chain, level_by_stake


def test_side_by_side_processes_save_the_largest_saving_and_a_sequence_adds():
    starts, ends = np.array([0.0, 0.0, 0.0]), np.array([10.0, 10.0, 10.0])
    assert heaviest_chain(starts, ends, np.array([1.0, 3.0, 2.0])) == 3.0
    # a script: a parent spanning three commands run one after the other
    starts, ends = np.array([0.0, 1.0, 4.0, 7.0]), np.array([10.0, 3.0, 6.0, 9.0])
    assert heaviest_chain(starts, ends, np.array([0.5, 1.0, 2.0, 1.5])) == 4.5
    assert heaviest_chain(starts, ends, np.array([5.0, 1.0, 2.0, 1.5])) == 5.0
    # touching spans (one ends as the next starts) are in sequence; no saving, no chain
    assert heaviest_chain(np.array([0.0, 2.0]), np.array([2.0, 4.0]), np.array([1.0, 1.0])) == 2.0
    assert heaviest_chain(starts, ends, np.zeros(4)) == 0.0


class _Process:
    def __init__(self, start_s, end_s, rank=-1):
        self.start_s, self.end_s, self.rank = start_s, end_s, rank


class _Job:
    def __init__(self, runtime_s, processes, nprocs=None):
        self.runtime_s, self.processes = runtime_s, processes
        self.nprocs = nprocs or len(processes)


def test_wall_clock_stakes_are_capped_by_spans_and_the_run_time_and_take_shared_records_slowest_part():
    clock = WallClock(_Job(10.0, [_Process(0.0, 4.0), _Process(5.0, 9.0)]))
    # each process saves at most its span (4 s), in wall-clock and process-seconds; in sequence they add
    assert clock.stake(np.array([6.0, 1.0])) == (5.0, 5.0)
    # a Darshan job: spans unknown, every rank the whole job; a shared record of 80 rank-seconds
    # whose slowest rank spent a quarter of its time holds 20 of them
    ranks = WallClock(_Job(30.0, [_Process(math.nan, math.nan, r) for r in range(8)]))
    assert ranks.stake(np.zeros(8), np.array([80.0]), np.array([0.25])) == (20.0, 80.0)
    # never more than the run time; damaged values count as nothing
    assert ranks.stake(np.full(8, 50.0)) == (30.0, 240.0)
    assert ranks.stake(np.array([np.nan, np.inf, -1.0, 2.0, 0, 0, 0, 0])) == (2.0, 2.0)


def test_levels_follow_the_stake():
    def level(level, stake, runtime=100.0):
        return level_by_stake({"level": level, "at_stake_s": stake}, runtime)
    assert level("high", 5.0) == "high"
    assert level("high", 0.5) == "warn"       # under 1 % of the run time
    assert level("high", None) == level("warn", 0.0) == "info"
    assert level("info", None) == "info" and level("ok", None) == "ok"


@pytest.fixture(scope="module")
def shipped_assessments():
    out = {}
    for log in shipped_darshan_logs():
        job, model, path, choice = load_and_choose([log])
        out[os.path.basename(log)] = assess(job, model, path, None, choice)
    return out


def test_every_shipped_log_keeps_every_rule(shipped_assessments):
    broken = {name: violations(a) for name, a in shipped_assessments.items()}
    assert not any(broken.values()), broken
    # what the rules are about is there to check: findings of jobs whose ranks ran side by side,
    # whose wall-clock stake is not their processes' savings added up
    side_by_side = [f["title"] for a in shipped_assessments.values() for f in a["recommendations"]
                    if f["at_stake_s"] and f["rank_seconds"] and f["at_stake_s"] < f["rank_seconds"]]
    assert side_by_side, "no finding of a job whose ranks ran side by side"


def test_report_check_passes_on_a_shipped_log_and_names_the_rules_in_its_help(ioassess, tmp_path):
    log = next(p for p in shipped_darshan_logs() if os.path.basename(p) == "sample-badost.darshan")
    result = ioassess("report", log, "-o", tmp_path / "r.html", "--check")
    assert result.returncode == 0, result.stderr
    assert "rule broken" not in result.stderr
    assert "--check" in ioassess("report", "--help").stdout


def _first(a, **where):
    return next(f for f in a["recommendations"] if all(f[k] == v for k, v in where.items()))


BREAKS = {
    "not a finite number": lambda a: a["headline"].__setitem__("io_s", math.nan),
    "stake above the run time": lambda a: _first(a, level="high").__setitem__("at_stake_s", 1e9),
    "named part above the stake": lambda a: next(f for f in a["recommendations"] if f["files"] and f["at_stake_s"])
    ["files"][0].__setitem__("seconds", 1e9),
    "a warn finding without a positive stake": lambda a: _first(a, level="high").update(level="warn", at_stake_s=0.0),
    "a high finding with less than 1%": lambda a: _first(a, level="high").update(at_stake_s=1e-3, rank_seconds=1.0),
    "the verdict 'I/O time lost is small' beside high findings":
        lambda a: a["recommendations"].append({**_first(a, level="info"), "title": "I/O time lost is small",
                                              "level": "ok"}),
    "not ranked by their stake": lambda a: a["recommendations"].reverse(),
    "time lost above the I/O time": lambda a: a["headline"].__setitem__("lost_high_s", a["headline"]["io_s"] * 2),
    "lost share of the run time": lambda a: a["headline"].__setitem__("lost_share_of_runtime", 2.0),
    "processes with I/O of": lambda a: a["job"].__setitem__("processes_with_io", a["job"]["nprocs"] + 1),
    "two I/O times for rank": lambda a: a["per_process"]["stragglers"]["ranks"][0].__setitem__("seconds", 1e6),
    "two I/O times for the job": lambda a: a["processes"][0].__setitem__("io_s", a["processes"][0]["io_s"] + 1.0),
    "two times lost for the job": lambda a: a["classes"][0].__setitem__("lost_high_s", 1e6),
}


@pytest.mark.parametrize("rule", BREAKS)
def test_each_rule_broken_in_a_real_assessment_is_named(shipped_assessments, rule):
    a = copy.deepcopy(shipped_assessments["sample-badost.darshan"])
    assert violations(a) == []
    BREAKS[rule](a)
    assert any(rule in v for v in violations(a)), violations(a)


def test_two_commands_one_after_the_other_add_their_savings(ioassess, tmp_path):
    """sh runs dd twice, the second after the first ended; each reads a file in 4 KiB requests
    (Drishti's P05: many small reads). The job's run time shortens by both commands' savings:
    the wall-clock stake is their sum, and each dd is named with its own part."""
    data = tmp_path / "data"
    data.write_bytes(os.urandom(8 << 20))
    script = f"dd if={data} of=/dev/null bs=4k 2>/dev/null; dd if={data} of=/dev/null bs=4k 2>/dev/null"
    ran = ioassess("run", "--trace-dir", tmp_path / "t", "--", "sh", "-c", script)
    assert ran.returncode == 0, ran.stderr
    a = json.loads((tmp_path / "t" / "assessment.json").read_text())
    assert violations(a) == []
    found = next(f for f in a["recommendations"] if f["code"] == "P05")
    parts = [r["seconds"] for r in found["ranks"]]
    assert len(parts) == 2 and all(p > 0 for p in parts)
    assert found["at_stake_s"] == pytest.approx(sum(parts), rel=1e-9) == pytest.approx(found["rank_seconds"], rel=1e-9)
    assert "wall-clock" in found["at_stake_how"]
