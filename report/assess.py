"""The assessment of a Job under a cause model: plain, JSON-serialisable data (a dict) that the
HTML report, assessment.json and the tests all read. docs/assessment.md lists every field.

The ops' classes and time lost come from classify.py, the sections from sections.py,
processes.py, io_model.py, metadata.py, access_patterns.py and storage_targets.py, the findings from findings.py.
Only the POSIX and STDIO layers count as I/O time (MPI-IO time contains the POSIX time under
it: the layers are shown side by side, never added); the POSIX reads and writes made inside
collective MPI-IO calls are the aggregators' work.
"""
import collections
import datetime
import math

import numpy as np

from ioassess.inputs.job import META
from ioassess.models.plain import finite_or_none, ratio_or_none

from .access_patterns import access_patterns
from .classify import CAUSES, ROW_CLASSES, classify_ops, estimate_totals
from .findings import recommendations
from .latency import latency_histograms
from .io_model import io_model_cell, site_grid_placement, write_throughput
from .ledger import io_rows, job_ledger, total
from .metadata import known_only_from_metadata, metadata_section
from .model_choice import file_models
from .processes import launcher_processes, per_process_view, pid_or_none, process_io, process_table, shared_record_ranks
from .schema import check_if_asked
from .stakes import JobSeconds, WallClock
from .storage_targets import storage_targets
from .sections import (aggregator_work, asynchronous_io, class_table, collective_io, file_system_while_running,
                       file_table, flushes, io_uring_instances, kernel_word, layer_table, mapped_files, model_lines,
                       per_file_io, runtime_files, scatter_sample, size_table, slowdown_timeline, tail_statistics,
                       timeline, unassessed_module_table)

FORMAT = "ioassess-assessment"
FORMAT_VERSION = 1


def assess(job, model, model_source="", site_grid=None, model_choice=None, probe_db=None, history=None):
    """The assessment (a dict) of a Job under a CauseModel. site_grid: None, or the site's
    I/O-model grid to place the job on, {"path", "grid"} (a grid of ioassess.site.iomodels.load_grid),
    or {"path", "problem"} for one that could not be used. model_choice: how the model was
    chosen and why (report.model_choice), or None; where it gives a file system a model of its
    own, that model judges the ops of its files (model_choice.file_models). probe_db: the file-system probe's store, or
    None. history: history(assessment) -> how this run compares with its application's last
    runs at the site (the epilog asks the site's store, ioassess.site.fleet.history), or None.
    With IOASSESS_CHECK_SCHEMA=1 (the tests) it raises report.schema.SchemaMismatch when
    the assessment breaks its JSON Schema (report/assessment.schema.json)."""
    models = file_models(job, model, model_source, model_choice)
    per_op = classify_ops(job, model, models)
    per_total = estimate_totals(job, model, models)
    ledger = job_ledger(job, per_op, per_total)
    per_process = process_io(job, ledger)
    shared = shared_record_ranks(job, per_total)
    aggregation = aggregator_work(job)
    clock = WallClock(job)
    processes = process_table(job, per_process, shared, aggregation)
    per_file = per_file_io(job, ledger)
    headline = headline_numbers(job, per_op, ledger, processes)
    cell = {**io_model_cell(job), **write_throughput(job)}
    assessment = {
        "format": FORMAT,
        "version": FORMAT_VERSION,
        "job": job_facts(job, cell),
        "model": {"name": model.name, "description": model.description, "source": model_source,
                  "provenance": model.provenance, "choice": model_choice},
        "tier": tier_of(job),
        "headline": headline,
        "kernel": kernel_word(job, per_op),
        "classes": class_table(job, per_op, per_total),
        "flushes": flushes(job, models),
        "layers": layer_table(job),
        "unassessed_modules": unassessed_module_table(job),
        "asynchronous": asynchronous_io(job, per_op),
        "mapped_files": mapped_files(job),
        "io_uring": io_uring_instances(job),
        "collective_io": collective_io(job, aggregation),
        "top_files": file_table(job, per_op, per_total, per_file),
        "runtime_files": runtime_files(job, per_op, per_total),
        "sizes": size_table(job, per_op, per_total),
        "timeline": timeline(job, per_op),
        "slowdown": slowdown_timeline(job, per_op),
        "tails": tail_statistics(job, per_op),
        "latency": latency_histograms(job, per_op),
        "processes": processes,
        "per_process": per_process_view(job, per_op, per_process, per_total, shared),
        "io_model": cell,
        "site_grid": site_grid_placement(cell, site_grid),
        "scatter": scatter_sample(job, per_op),
        "model_lines": model_lines(model),
        "file_system": file_system_while_running(job, per_op, probe_db),
        "metadata": metadata_section(job, ledger, headline["io_s"]),
        "access_patterns": access_patterns(job, per_op, per_total, clock),
        "storage_targets": storage_targets(job, per_file),
    }
    assessment["history"] = history(assessment) if history else None
    assessment["recommendations"] = recommendations(assessment, JobSeconds(job, per_op, per_total, per_file, clock))
    check_if_asked(assessment)
    return assessment


def tier_of(job):
    """How the job's reads, writes and syncs are known (metadata calls: the metadata section's tier)."""
    has_ops, has_totals = bool(np.any(job.ops["direction"] != META)), bool(np.any(job.totals["direction"] != META))
    return "ops" if has_ops and not has_totals else "counters" if has_totals and not has_ops else \
        "mixed" if has_ops else "none"


def job_facts(job, cell):
    """The job's facts; processes with I/O are the I/O-model cell's processes doing I/O (every
    rank when a shared-file record moved data), launchers are the processes of no rank in a job
    whose other processes have ranks (mpiexec and its proxies). Files and Darshan ranks known only
    from metadata calls are the metadata section's, not counted here."""
    launchers = set(launcher_processes(job))
    hosts = collections.Counter(p.hostname for i, p in enumerate(job.processes) if p.hostname and i not in launchers)
    unfinished = [p for p in job.processes if p.source == "trace" and p.end_reason == "running/killed"]
    metadata_files, metadata_processes = known_only_from_metadata(job)
    return {
        "job_id": job.job_id, "exe": job.exe, "cmdline": job.cmdline, "user": job.user,
        "start": _iso(job.start_epoch_s), "end": _iso(job.end_epoch_s),
        "runtime_s": finite_or_none(job.runtime_s), "nprocs": job.nprocs,
        "processes_recorded": len(job.processes) - metadata_processes,
        "processes_with_io": cell["processes_doing_io"],
        "launchers": len(launchers),
        "hosts": [{"hostname": host, "processes": count} for host, count in sorted(hosts.items())],
        "unfinished_processes": [{"rank": p.rank, "pid": pid_or_none(p.pid), "hostname": p.hostname}
                                 for p in unfinished],
        "files": len(job.files) - metadata_files,
        "mounts": [{"mount_point": m, "fs_type": t} for m, t in job.mounts],
        "inputs": [{"path": i.path, "kind": i.kind, "tiers": list(i.tiers), "notes": list(i.notes)}
                   for i in job.inputs],
        "notes": list(job.notes),
    }


def headline_numbers(job, per_op, ledger, processes):
    """The job's I/O time in one account: io_s = time if cached + time lost compared with cached
    I/O (what caching would save, lost_by_cause: waiting for storage, writing whole pages of
    uncached files into new pages) + slowness caching would not save (slowness_by_cause: stalls,
    allocation, memory), each a sum over the ledger."""
    io, io_in_ledger = per_op["is_io"], io_rows(ledger)
    job_total = total(ledger, io_in_ledger)
    io_s, lost_low, lost_high = job_total["seconds"], job_total["lost_low_s"], job_total["lost_high_s"]
    slowness = job_total["slowness_s"]
    lost_by_cause, slowness_by_cause = collections.Counter(), collections.Counter()
    for code, cls in enumerate(ROW_CLASSES):
        if cls in CAUSES:
            member = io & (per_op["class"] == code)
            lost = float(per_op["lost_s"][member].sum())
            lost_by_cause["storage" if CAUSES[cls] == "storage" else "new_pages"] += lost
            slowness_by_cause[CAUSES[cls]] += float(per_op["slowness_s"][member].sum())
    runtime = job.runtime_s
    critical = max(processes, key=lambda p: p["lost_high_s"], default=None)
    slowest = max(processes, key=lambda p: p["io_s"], default=None)
    return {
        "io_s": io_s,
        "if_cached_low_s": io_s - lost_high - slowness, "if_cached_high_s": io_s - lost_low - slowness,
        "lost_low_s": lost_low, "lost_high_s": lost_high,
        "estimate": bool(ledger["estimated"][io_in_ledger].any()),
        "lost_share_of_io": ratio_or_none((lost_low + lost_high) / 2, io_s),
        "lost_by_cause": {cause: lost_by_cause[cause] for cause in ("storage", "new_pages")},
        "slowness_s": slowness,
        "slowness_by_cause": {cause: slowness_by_cause[cause] for cause in ("stall", "allocation", "memory")},
        "own_cached_ops": int(np.count_nonzero(io & per_op["own_line"])),
        "runtime_s": finite_or_none(runtime),
        "io_share_of_runtime": ratio_or_none(slowest["io_s"], runtime) if slowest and math.isfinite(runtime)
        else None,
        "lost_share_of_runtime": ratio_or_none(critical["lost_high_s"], runtime) if critical and math.isfinite(runtime)
        else None,
        "critical_path": critical,
        "most_io_process": slowest,
    }


def _iso(epoch_s):
    if not math.isfinite(epoch_s) or epoch_s <= 0:
        return None
    try:
        return datetime.datetime.fromtimestamp(epoch_s, datetime.timezone.utc).isoformat(timespec="seconds")
    except (OverflowError, OSError, ValueError):   # a damaged log's time beyond any calendar's
        return None
