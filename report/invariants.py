"""The rules every assessment keeps, so that each number on the page agrees with every other
and with the job (docs/assessment.md, "The rules an assessment keeps"). `violations(a)` lists
the broken ones as sentences; `ioassess report --check` prints them and exits 1, and with
IOASSESS_CHECK_SCHEMA=1 (the tests) assess() raises on any (report/schema.py).
"""
import math

from .stakes import HIGH_MIN_SHARE_OF_RUNTIME

# Rounding slack: sums of the same seconds taken in another order differ in their last bits.
SLACK = 1e-9


def _close_above(value, bound):
    """value exceeds bound by more than rounding."""
    return value > bound + SLACK * max(1.0, abs(bound))


def non_finite(value, path="assessment"):
    """The JSON paths of every NaN or infinite number in value."""
    if isinstance(value, float):
        return [] if math.isfinite(value) else [path]
    if isinstance(value, dict):
        return [p for key, item in value.items() for p in non_finite(item, f"{path}.{key}")]
    if isinstance(value, (list, tuple)):
        return [p for i, item in enumerate(value) for p in non_finite(item, f"{path}[{i}]")]
    return []


def finding_rules(f, runtime_s):
    """The rules of one finding: its stake within the run time, its named files' and ranks'
    seconds within its stake, a level to act on (high, warn) only with a positive stake, high
    only with at least HIGH_MIN_SHARE_OF_RUNTIME of the run time."""
    title, stake, level = f["title"], f["at_stake_s"], f["level"]
    out = []
    if stake is not None and runtime_s is not None and _close_above(stake, runtime_s):
        out.append(f"stake above the run time: {title!r} has {stake} s at stake in a job of {runtime_s} s")
    for kind in ("files", "ranks"):
        for named in f[kind]:
            if named.get("seconds") is not None and (stake is None or _close_above(named["seconds"], stake)):
                who = named.get("name", named.get("rank"))
                out.append(f"named part above the stake: {title!r} names {who} with {named['seconds']} s "
                           f"of {stake} s at stake")
    if level in ("high", "warn") and (stake is None or not stake > 0):
        out.append(f"a {level} finding without a positive stake: {title!r} ({stake})")
    if level == "high" and stake and runtime_s and stake < HIGH_MIN_SHARE_OF_RUNTIME * runtime_s * (1 - SLACK):
        out.append(f"a high finding with less than {HIGH_MIN_SHARE_OF_RUNTIME:.0%} of the run time at stake: "
                   f"{title!r} ({stake} s of {runtime_s} s)")
    rank_s = f.get("rank_seconds")
    if rank_s is not None and stake is not None and _close_above(stake, rank_s):
        out.append(f"wall-clock stake above the process-seconds it is made of: {title!r} ({stake} > {rank_s})")
    return out


def verdict_rules(findings):
    """No verdict that the time lost is small beside a high finding; findings to act on ranked
    by their wall-clock stake."""
    out = []
    high = [f["title"] for f in findings if f["level"] == "high"]
    if high and any(f["title"] == "I/O time lost is small" for f in findings):
        out.append(f"the verdict 'I/O time lost is small' beside high findings: {', '.join(high)}")
    stakes = [f["at_stake_s"] for f in findings if f["level"] in ("high", "warn") and f["at_stake_s"] is not None]
    if any(a < b for a, b in zip(stakes, stakes[1:])):
        out.append("findings to act on are not ranked by their stake")
    return out


def headline_rules(a):
    """The headline's time lost within its I/O time; the lost share within the I/O share, both
    of the run time; processes with I/O within the job's processes."""
    head, job, out = a["headline"], a["job"], []
    if _close_above(head["lost_high_s"], head["io_s"]):
        out.append(f"time lost above the I/O time: {head['lost_high_s']} s of {head['io_s']} s")
    lost_share, io_share = head["lost_share_of_runtime"], head["io_share_of_runtime"]
    if lost_share is not None and (io_share is None or _close_above(lost_share, io_share)):
        out.append(f"lost share of the run time {lost_share} above the I/O share {io_share}")
    if job["processes_with_io"] > max(job["nprocs"], job["processes_recorded"]):
        out.append(f"{job['processes_with_io']} processes with I/O of {job['nprocs']} processes")
    for row in a["processes"]:
        if _close_above(row["lost_high_s"], row["io_s"]):
            out.append(f"rank {row['rank']} pid {row['pid']} lost {row['lost_high_s']} s of {row['io_s']} s")
    return out


def process_rules(a):
    """One I/O time per process wherever it is named: the headline's processes, the per-rank
    view's slowest and most-lost ranks and the stragglers hold the processes table's numbers
    (a rank's: its processes' sum)."""
    out = []
    rows = a["processes"]
    by_rank, by_pid = {}, {}
    for row in rows:
        by_rank[row["rank"]] = by_rank.get(row["rank"], 0.0) + row["io_s"]
        if row["pid"] is not None:
            by_pid[row["pid"]] = row["io_s"]
    head = a["headline"]
    for name in ("critical_path", "most_io_process"):
        named = head[name]
        if named is not None and named not in rows:
            out.append(f"the headline's {name} is not a row of the processes table")
    view = a["per_process"]
    if not view or not view["io"]:
        return out
    rank_unit = view["unit"] == "rank"
    named = [view["io"]["max"]] + ((view["stragglers"] or {}).get("ranks") or [])
    for unit in named:
        expected = by_rank.get(unit["rank"], 0.0) if rank_unit else by_pid.get(unit["pid"], 0.0)
        if abs(unit["seconds"] - expected) > SLACK * max(1.0, expected) + 1e-9:
            who = f"rank {unit['rank']}" if rank_unit else f"pid {unit['pid']}"
            out.append(f"two I/O times for {who}: {unit['seconds']} s in the per-rank view, {expected} s in "
                       "the processes table")
    return out


def total_rules(a):
    """One I/O time for the job: the headline's is the classes' sum, the POSIX and stdio layers'
    sum and the processes' sum with the part of Darshan's shared records no rank holds; one time
    lost and one slowness: the headline's are the classes' sums, its slowness the sum of its
    causes, and the I/O time is its time if cached, time lost and slowness added up."""
    head, out = a["headline"], []
    view = a["per_process"]
    left_out = view["shared"]["left_out_s"] if view and view["shared"] else 0.0
    totals = {"the classes": sum(row["seconds"] for row in a["classes"]),
              "the layers": sum((row["posix"] or {}).get("seconds", 0.0) + (row["stdio"] or {}).get("seconds", 0.0)
                                for row in a["layers"]),
              "the processes": sum(row["io_s"] for row in a["processes"]) + left_out}
    for where, seconds in totals.items():
        if abs(seconds - head["io_s"]) > 1e-9 * max(1.0, head["io_s"]):
            out.append(f"two I/O times for the job: {head['io_s']} s in the headline, {seconds} s in {where}")
    lost = sum(row["lost_high_s"] for row in a["classes"])
    if abs(lost - head["lost_high_s"]) > 1e-9 * max(1.0, head["lost_high_s"]):
        out.append(f"two times lost for the job: {head['lost_high_s']} s in the headline, {lost} s in the classes")
    slowness = {"the classes": sum(row["slowness_s"] for row in a["classes"]),
                "its causes": sum(head["slowness_by_cause"].values())}
    for where, seconds in slowness.items():
        if abs(seconds - head["slowness_s"]) > 1e-9 * max(1.0, head["slowness_s"]):
            out.append(f"two slownesses for the job: {head['slowness_s']} s in the headline, {seconds} s in {where}")
    added = head["if_cached_low_s"] + head["lost_high_s"] + head["slowness_s"]
    if abs(added - head["io_s"]) > 1e-9 * max(1.0, head["io_s"]):
        out.append(f"the I/O time {head['io_s']} s is not time if cached, lost and slowness added up ({added} s)")
    return out


def metadata_rules(a):
    """One metadata time for the job: the metadata section's is the sum over its file systems and
    over the POSIX and stdio layers; its ranks (with Darshan's shared records) hold no more."""
    meta, out = a["metadata"], []
    if not meta:
        return out
    layers = [meta["layers"][name] or {} for name in ("posix", "stdio")]
    totals = {"its file systems": sum(fs["seconds"] for fs in meta["file_systems"]),
              "the POSIX and stdio layers": sum(layer.get("seconds", 0.0) for layer in layers)}
    for where, seconds in totals.items():
        if abs(seconds - meta["seconds"]) > 1e-9 * max(1.0, meta["seconds"]):
            out.append(f"two metadata times for the job: {meta['seconds']} s in all, {seconds} s in {where}")
    ranks = meta["per_rank"]
    if ranks:
        held = (ranks["spread"]["mean_s"] * ranks["count"] if ranks["spread"] else 0.0) + \
            (ranks["shared"]["seconds"] if ranks["shared"] else 0.0)
        if _close_above(held, meta["seconds"] * (1 + 1e-9)):
            out.append(f"the ranks hold {held} s of metadata time, more than the job's {meta['seconds']} s")
    return out


def violations(a):
    """Every rule the assessment a breaks, as sentences (empty: it keeps them all)."""
    out = [f"not a finite number: {p}" for p in non_finite(a)]
    runtime_s = a["headline"]["runtime_s"]
    for f in a["recommendations"]:
        out += finding_rules(f, runtime_s)
    out += verdict_rules(a["recommendations"])
    out += headline_rules(a)
    out += process_rules(a)
    out += total_rules(a)
    out += metadata_rules(a)
    return out
