"""A job's record in the site's store (docs/fleet.md, "Schema"), taken from the job's
assessment (report/assess.py): its jobs row as a dict ("job"), and its rows of the other tables
as columns (without job_key and month, the job's), with the hash that makes spooling and
compaction idempotent. Pure: an assessment in, a record out."""
import datetime
import hashlib
import json
import os

from ...report.latency import LATENCY_SCALE
from .schema import SCHEMA_VERSION, RecordError

# A job's top files kept in the store (most time lost first): a few, so a job takes about 1 KiB.
TOP_FILES = 5
CAUSES = ("storage", "new_pages", "stall", "allocation", "memory")
LAYERS = ("posix", "stdio", "mpiio")
DIRECTIONS = ("read", "write")
UNKNOWN_MONTH = "unknown"
# The main cause of a job whose time lost is known only from Darshan's counters (no cause per op).
COUNTERS_CAUSE = "counters"


def job_record(assessment, step="", user=None, account="", report="", source=""):
    """{table: [rows]} of one job. step: the Slurm step ("" for the whole job); user, account:
    from the scheduler where the caller knows them (the assessment's `job.user` otherwise);
    report: where the job's HTML report is, if anywhere; source: the input it was made of (a
    trace directory, a Darshan log, an assessment file)."""
    if not isinstance(assessment, dict) or assessment.get("format") != "ioassess-assessment":
        raise RecordError("not an ioassess assessment (its `format` is not ioassess-assessment)")
    if assessment.get("version") != 1:
        raise RecordError(f"assessment version {assessment.get('version')!r}, not 1")
    try:
        job = _job_row(assessment, step, user, account, report, source)
    except (KeyError, TypeError, AttributeError) as error:
        raise RecordError(f"the assessment lacks a field the store needs ({error})") from None
    findings = assessment.get("recommendations") or []
    files = (assessment.get("top_files") or [])[:TOP_FILES]
    record = {"job": job,
              "findings": {"position": list(range(len(findings))), **_columns(findings, (
                  "code", "title", "level", "at_stake_s", "rank_seconds"))},
              "files": {"position": list(range(len(files))), **_columns(files, (
                  "name", "fs_type", "mount_point", "ops", "bytes", "seconds", "lost_high_s"))},
              "latency": _latency_columns(assessment.get("latency"))}
    return keyed(record)


def rekeyed(record, job_id, user):
    """The record with the job's id and user as the scheduler gives them (replacing what the
    record says) and its key and hash made anew."""
    return keyed({**record, "job": {**record["job"], "job_id": str(job_id), "user": str(user)}})


def keyed(record):
    """The record with its job key and hash: the job id and step ("1234.0", "1234" for the
    whole job); a job without an id (a run outside a scheduler) is named by a hash of its
    record, so that two runs are two keys however alike their facts."""
    job = record["job"]
    if job["job_id"]:
        job["job_key"] = f"{job['job_id']}.{job['step']}" if job["step"] else job["job_id"]
    else:
        job["job_key"] = ""
        job["job_key"] = "run-" + record_hash(record)[:16]
    job["record_hash"] = record_hash(record)
    return record


def _columns(rows, names):
    return {name: [row[name] for row in rows] for name in names}


def record_hash(record):
    """sha256 of the record (without the hash itself), as canonical JSON."""
    content = {**record, "job": {k: v for k, v in record["job"].items() if k != "record_hash"}}
    return hashlib.sha256(json.dumps(content, sort_keys=True).encode()).hexdigest()


def _job_row(a, step, user, account, report, source):
    job, head, model = a["job"], a["headline"], a["model"]
    provenance = model.get("provenance") or {}
    start, end = job_time(job["start"]), job_time(job["end"])
    month = (end or start).strftime("%Y-%m") if (end or start) else UNKNOWN_MONTH
    start, end = _microseconds(start), _microseconds(end)
    causes = {**head["lost_by_cause"], **head["slowness_by_cause"]}
    main_cause = max(CAUSES, key=lambda cause: causes.get(cause) or 0.0)
    findings = a.get("recommendations") or []
    choice = model.get("choice") or {}
    main_fs = choice.get("file_system") or {}
    estimated = head["lost_high_s"] > 0 and not any(causes.get(cause) for cause in CAUSES)
    row = {
        "job_key": "", "job_id": job["job_id"], "step": step, "user": user if user is not None else job["user"],
        "account": account, "app": app_name(job),
        "nodes": len(job["hosts"]) or None, "processes": job["nprocs"], "start": start, "end": end, "month": month,
        "runtime_s": job["runtime_s"],
        "main_fs": main_fs.get("mount") or "", "main_fs_type": main_fs.get("type") or "",
        "file_systems": ",".join(sorted({m["mount_point"] for m in job["mounts"]})),
        "tier": a["tier"], "io_cell": (a.get("io_model") or {}).get("name") or "",
        "io_s": head["io_s"], "lost_low_s": head["lost_low_s"], "lost_high_s": head["lost_high_s"],
        **{f"{cause}_s": causes.get(cause) or 0.0 for cause in CAUSES},
        "main_cause": main_cause if causes.get(main_cause) else COUNTERS_CAUSE if estimated else "",
        "findings": len(findings), "first_finding": (findings[0]["code"] or findings[0]["title"]) if findings else "",
        "at_stake_s": findings[0]["at_stake_s"] if findings else None,
        "meta_calls": (a.get("metadata") or {}).get("calls") or 0,
        "meta_s": (a.get("metadata") or {}).get("seconds") or 0.0,
        "model": model["name"], "model_match": choice.get("match") or "",
        "model_fs_type": (provenance.get("file_system") or {}).get("type") or "",
        "model_host": provenance.get("host") or "", "model_date": provenance.get("date") or "",
        "probe_slowdown": _probe_slowdown(a.get("file_system")),
        "report": report, "source": source, "schema_version": SCHEMA_VERSION,
    }
    for layer in LAYERS:
        for direction in DIRECTIONS:
            row[f"{layer}_{direction}_bytes"], row[f"{layer}_{direction}_s"] = 0, 0.0
    for entry in a["layers"]:
        if entry["direction"] in DIRECTIONS:
            for layer in LAYERS:
                amounts = entry[layer] or {}
                row[f"{layer}_{entry['direction']}_bytes"] = amounts.get("bytes") or 0
                row[f"{layer}_{entry['direction']}_s"] = amounts.get("seconds") or 0.0
    return row


def app_name(job):
    """The job's application: its executable's name ("" when unknown)."""
    return os.path.basename(job["exe"]) if job["exe"] else ""


def _latency_columns(latency):
    """The histograms as columns kind, mount_point, fs_type, bin, count (a row per non-empty bin)."""
    columns = {"kind": [], "mount_point": [], "fs_type": [], "bin": [], "count": []}
    if not latency:
        return columns
    if latency["scale"] != LATENCY_SCALE.as_dict():
        raise RecordError(f"the assessment's latency scale {latency['scale']} is not the store's "
                          f"{LATENCY_SCALE.as_dict()}")
    for h in latency["histograms"]:
        for name in ("kind", "mount_point", "fs_type"):
            columns[name] += [h[name]] * len(h["bins"])
        columns["bin"] += h["bins"]
        columns["count"] += h["counts"]
    return columns


def _probe_slowdown(file_system):
    """The largest slowdown of the probe's slow spans on the file systems the job used (1.0: the
    probe saw none), None without probe data."""
    if not file_system or file_system.get("problem") or not file_system.get("targets"):
        return None
    spans = [span["slowdown"] for target in file_system["targets"] if target.get("used_by_job")
             for span in target.get("slow_spans") or []]
    return max(spans, default=1.0)


def _microseconds(moment):
    """Microseconds since the epoch (the store's timestamps; exact through JSON), None unknown."""
    return None if moment is None else round(moment.timestamp() * 1e6)


def job_time(text):
    """An assessment's job start or end (ISO 8601) as an aware datetime (UTC when it names no
    zone), None when unknown."""
    if not text:
        return None
    moment = datetime.datetime.fromisoformat(text)
    return moment if moment.tzinfo else moment.replace(tzinfo=datetime.timezone.utc)
