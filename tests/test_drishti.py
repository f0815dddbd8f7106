"""Drishti 0.8 and ioassess side by side on every Darshan log PyDarshan ships: each code Drishti
reports has an ioassess finding of the same code, or a reason documented in docs/assessment.md
("Access patterns") that holds for that log; no ioassess finding contradicts Drishti's evidence."""
import csv
import json
import os
import shutil
import subprocess
import sys

import darshan
import pytest

from ioassess.report.access_patterns import MOSTLY_SEQUENTIAL
from recorder_helpers import shipped_darshan_logs

# Drishti's codes and what ioassess reports for the same evidence (docs/assessment.md).
# Facts about the job that Drishti states as such (its INFO and OK levels) are facts here too.
FACT_CODES = {"P01", "P02", "P03", "P04", "P12", "P14", "M04", "M05"}
# The codes both report, per log (dxt.darshan: Drishti 0.8 fails on it): every trigger family that
# fires on PyDarshan's logs is among them.
AGREED = {
    "example.darshan": {"M05", "M07", "P01", "P03", "P08", "P14"},
    "ior_hdf5_example.darshan": {"M06", "M07", "P02", "P08", "P12", "P14", "P19"},
    "noposix.darshan": {"M01", "S01"},
    "noposixopens.darshan": {"M01", "S01"},
    "sample-badost.darshan": {"M01", "P01", "P03", "P14"},
    "sample-goodost.darshan": {"M01", "P01", "P03", "P14"},
    "sample.darshan": {"M05", "M07", "P01", "P03", "P08", "P14"},
    "sample-dxt-simple.darshan": {"M07", "P01", "P03", "P21"},
    "shane_macsio_id29959_5-22-32552-7035573431850780836_1590156158.darshan":
        {"M05", "M07", "P01", "P03", "P06", "P08", "P12", "P14", "P16", "P18", "P19"},
}
# Pairs that cannot both hold of one job: (Drishti's, ioassess's).
CONTRADICTIONS = {("P12", "P11"), ("P11", "P12"), ("P14", "P13"), ("P13", "P14"), ("M04", "M02"), ("M02", "M04"),
                  ("M05", "M03"), ("M03", "M05"), ("P01", "P02"), ("P02", "P01"), ("P03", "P04"), ("P04", "P03")}


def drishti_codes(log, out_dir):
    """The codes Drishti 0.8 reports for log (its --csv export), or None when it fails on the log."""
    drishti = shutil.which("drishti") or os.path.join(os.path.dirname(sys.executable), "drishti")
    result = subprocess.run([drishti, "--csv", "--export_dir", str(out_dir), log], cwd=out_dir,
                            capture_output=True, text=True, timeout=600)
    name = os.path.basename(log)[:-len(".darshan")]
    exported = [f for f in os.listdir(out_dir) if f.endswith(".csv") and name in f]
    if result.returncode != 0 or not exported:
        return None, result.stderr
    with open(out_dir / exported[0]) as f:
        header, values = list(csv.reader(f))[:2]
    return {code for code, value in zip(header, values) if value == "True"}, result.stderr


def ioassess_findings(ioassess, log, out_dir):
    result = ioassess("report", log, "-o", out_dir / "report.html", "--json", out_dir / "assessment.json")
    assert result.returncode == 0, result.stderr
    with open(out_dir / "assessment.json") as f:
        assessment = json.load(f)
    return assessment, {r["code"]: r for r in assessment["recommendations"] if r["code"]}


def sequential_share(log, direction):
    """The log's POSIX sequential reads (writes) over its reads (writes): Darshan's counters."""
    with darshan.DarshanReport(log, read_all=True) as report:
        counters = report.records["POSIX"].to_df()["counters"]
    requests = counters[f"POSIX_{direction.upper()}S"].clip(lower=0).sum()
    return counters[f"POSIX_SEQ_{direction.upper()}S"].clip(lower=0).sum() / requests


def why_not(code, assessment, log):
    """Why ioassess makes no finding of Drishti's code on this log (docs/assessment.md, "Access
    patterns"), checked against the log's evidence; None if no documented reason holds."""
    if code in ("P12", "P14"):
        direction = "read" if code == "P12" else "write"
        if sequential_share(log, direction) <= MOSTLY_SEQUENTIAL:
            return f"Drishti says mostly sequential {direction}s whenever too few are random, at 0 % sequential too"
    if code in ("P09", "P10"):
        return "Drishti's test is the job's highest offset above its bytes moved: reads or writes that skip data"
    if code == "M01" and (assessment["job"]["nprocs"] <= 1 or assessment["job"]["processes_with_io"] <= 1):
        return "one process moved data: MPI-IO is for parallel jobs"
    if code in ("M06", "M07"):
        direction = "read" if code == "M06" else "write"
        mpiio_ops = sum(row["mpiio"]["ops"] for row in assessment["layers"]
                        if row["mpiio"] and row["direction"] == direction)
        if not mpiio_ops:
            return f"no MPI-IO {direction}s: Drishti fires it for every MPI-IO job"
    if code in ("M08", "M09", "M10"):
        return "Drishti asks Slurm's sacct for the node count"
    return None


@pytest.mark.parametrize("log", shipped_darshan_logs(), ids=os.path.basename)
def test_every_drishti_code_has_a_finding_or_a_documented_reason(ioassess, log, tmp_path):
    theirs, stderr = drishti_codes(log, tmp_path)
    assessment, ours = ioassess_findings(ioassess, log, tmp_path)
    if theirs is None:
        # dxt.darshan: Drishti 0.8 fails (an empty executable name: IndexError); ioassess reports it.
        assert "Traceback" in stderr and ours, stderr
        return
    assert theirs & set(ours) == AGREED[os.path.basename(log)]
    missing = {code: why_not(code, assessment, log) for code in sorted(theirs - set(ours))}
    assert all(missing.values()), f"Drishti's codes without a finding or a reason: {missing}"
    for code, finding in ours.items():
        assert not any((theirs_code, code) in CONTRADICTIONS for theirs_code in theirs), (code, theirs)
        if code in FACT_CODES:
            assert finding["level"] in ("info", "ok") and finding["at_stake_s"] is None
        elif finding["level"] in ("high", "warn") and finding["code"] not in ("M01",):
            assert finding["files"] or finding["code"] in ("S01", "P17"), finding
    # the ranking: what to act on first, most at stake first, then the facts
    levels = [r["level"] in ("info", "ok") for r in assessment["recommendations"]]
    assert levels == sorted(levels)
    at_stake = [r["at_stake_s"] for r in assessment["recommendations"]
                if r["level"] in ("high", "warn") and r["at_stake_s"] is not None]
    assert at_stake == sorted(at_stake, reverse=True)
