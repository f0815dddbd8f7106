"""Slow storage targets and straggler ranks (report/storage_targets.py, report/processes.py) on
PyDarshan's two IOR logs of one Lustre file system: sample-badost.darshan, 2048 ranks each
writing a file of its own, one OST slow while it ran, and sample-goodost.darshan, 48 ranks, no
slow OST. What the report says is checked against the same quantities computed here from what
PyDarshan itself reads of the logs (the POSIX and STDIO counters, the LUSTRE records' OSTs)."""
import json
import statistics

import numpy as np
import pytest

darshan = pytest.importorskip("darshan")
from darshan.log_utils import get_log_path  # noqa: E402

MIB = 1 << 20
STRAGGLERS = "Some ranks spent far longer in I/O than the others"
SLOW_TARGETS = "Files on some storage targets were far slower"


def per_file_and_rank(log):
    """From PyDarshan: per record id, its I/O time and bytes (POSIX and STDIO reads and writes,
    summed over ranks), its ranks and OSTs, and per rank its I/O time and bytes."""
    report = darshan.DarshanReport(log, read_all=True)
    files, ranks = {}, {}
    for module, prefix in (("POSIX", "POSIX"), ("STDIO", "STDIO")):
        if module not in report.records:
            continue
        frames = report.records[module].to_df()
        counters, fcounters = frames["counters"], frames["fcounters"]
        seconds = fcounters[f"{prefix}_F_READ_TIME"] + fcounters[f"{prefix}_F_WRITE_TIME"]
        nbytes = counters[f"{prefix}_BYTES_READ"] + counters[f"{prefix}_BYTES_WRITTEN"]
        for record_id, rank, s, b in zip(counters["id"].tolist(), counters["rank"].tolist(), seconds.tolist(),
                                         nbytes.tolist()):
            entry = files.setdefault(record_id, {"seconds": 0.0, "bytes": 0, "osts": (), "ranks": set()})
            entry["ranks"].add(rank)
            entry["seconds"] += s
            entry["bytes"] += b
            per_rank = ranks.setdefault(rank, {"seconds": 0.0, "bytes": 0})
            per_rank["seconds"] += s
            per_rank["bytes"] += b
    for record in report.records.get("LUSTRE", []):
        files[record["id"]]["osts"] = tuple(int(o) for o in record["components"][0]["ost_ids"])
    return report, files, ranks


def slow_targets(files):
    """The targets whose files' median time per MiB is at least 3 times the job's median (of the
    files that moved at least 1 MiB), with two files or more, and each's excess: its part of its
    files' time beyond their bytes at the job's median time per MiB."""
    chosen = {i: f for i, f in files.items() if f["osts"] and f["bytes"] >= MIB and f["seconds"] > 0}
    rate = {i: f["seconds"] / (f["bytes"] / MIB) for i, f in chosen.items()}
    median = statistics.median(rate.values())
    on = {}
    for i, f in chosen.items():
        for ost in f["osts"]:
            on.setdefault(ost, []).append(i)
    slow = {ost: sum(max(chosen[i]["seconds"] - chosen[i]["bytes"] / MIB * median, 0) / len(chosen[i]["osts"])
                     for i in ids)
            for ost, ids in on.items() if len(ids) >= 2 and statistics.median(rate[i] for i in ids) >= 3 * median}
    return median, len(on), slow


def assessment_of(ioassess, log, tmp_path):
    result = ioassess("report", log, "-o", tmp_path / "report.html", "--json", tmp_path / "a.json")
    assert result.returncode == 0, result.stderr
    with open(tmp_path / "a.json") as f:
        return json.load(f)


def finding(assessment, title):
    found = [r for r in assessment["recommendations"] if r["title"] == title]
    return found[0] if found else None


def test_the_slow_ost_of_sample_badost_is_named_with_its_files_and_seconds(ioassess, tmp_path):
    log = get_log_path("sample-badost.darshan")
    report, files, _ = per_file_and_rank(log)
    median, targets, slow = slow_targets(files)
    assert list(slow) == [14]

    a = assessment_of(ioassess, log, tmp_path)
    st = a["storage_targets"]
    assert (st["targets"], st["median_s_per_mib"]) == (targets, pytest.approx(median, rel=1e-9))
    assert [t["target"] for t in st["slow"]] == [14]
    assert st["slow"][0]["excess_s"] == pytest.approx(slow[14], rel=1e-6)
    on_14 = [i for i, f in files.items() if f["osts"] == (14,)]
    assert st["slow"][0]["files"] == len(on_14) == 85

    found = finding(a, SLOW_TARGETS)
    assert found is a["recommendations"][0] and found["level"] == "high"
    # summed over the ranks, the excess; in wall-clock time, the rank that waited longest for OST 14
    assert found["rank_seconds"] == pytest.approx(slow[14], rel=1e-6)
    by_rank = {}
    for i in on_14:
        (rank,) = files[i]["ranks"]
        by_rank[rank] = by_rank.get(rank, 0.0) + max(files[i]["seconds"] - files[i]["bytes"] / MIB * median, 0)
    assert found["at_stake_s"] == pytest.approx(max(by_rank.values()), rel=1e-6)
    assert found["at_stake_s"] <= a["job"]["runtime_s"]
    assert found["numbers"]["slow_targets"] == "14"
    names = {report.name_records[i] for i in on_14}
    assert found["files"] and {f["name"] for f in found["files"]} <= names
    excess = sorted((max(files[i]["seconds"] - files[i]["bytes"] / MIB * median, 0), report.name_records[i])
                    for i in on_14)
    assert found["files"][0]["name"] == excess[-1][1]
    text = " ".join(open(tmp_path / "report.html").read().split())
    assert "OST 14 is slow: its 85 files took" in text


def test_sample_badost_s_stragglers_moved_no_more_data_than_the_mean_rank(ioassess, tmp_path):
    log = get_log_path("sample-badost.darshan")
    _, _, ranks = per_file_and_rank(log)
    seconds = np.array([ranks.get(r, {"seconds": 0.0})["seconds"] for r in range(2048)])
    nbytes = np.array([ranks.get(r, {"bytes": 0})["bytes"] for r in range(2048)])
    slowest = int(np.argmax(seconds))

    a = assessment_of(ioassess, log, tmp_path)
    found = finding(a, STRAGGLERS)
    assert found["numbers"]["slowest_rank"] == slowest == 1507
    assert found["at_stake_s"] == pytest.approx(seconds[slowest] - seconds.mean(), rel=1e-6)
    assert found["numbers"]["slowest_bytes"] == nbytes[slowest] == 256 * MIB
    assert found["numbers"]["mean_bytes"] == pytest.approx(nbytes.mean())
    assert "no more data than the mean rank" in found["text"]
    assert [r["rank"] for r in found["ranks"]] == [int(r) for r in np.argsort(-seconds, kind="stable")[:5]]


def test_sample_goodost_has_no_slow_target(ioassess, tmp_path):
    log = get_log_path("sample-goodost.darshan")
    _, files, _ = per_file_and_rank(log)
    assert slow_targets(files)[2] == {}
    a = assessment_of(ioassess, log, tmp_path)
    assert a["storage_targets"]["slow"] == [] and a["storage_targets"]["targets"] > 3
    assert finding(a, SLOW_TARGETS) is None
    text = " ".join(open(tmp_path / "report.html").read().split())
    assert "No target is 3 times slower than that." in text


@pytest.mark.parametrize("name, words", [
    ("ior_hdf5_example.darshan", "1 file that moved at least 1 MiB is on 1 target;"),
    ("example.darshan", "1 file that moved at least 1 MiB is on 24 targets;"),
    ("sample-goodost.darshan", "48 files that moved at least 1 MiB are on 24 targets;")])
def test_the_storage_targets_words_agree_with_their_numbers(ioassess, tmp_path, name, words):
    a = assessment_of(ioassess, get_log_path(name), tmp_path)
    text = " ".join(open(tmp_path / "report.html").read().split())
    assert words in text, (a["storage_targets"], text[text.find("Storage targets"):][:200])
