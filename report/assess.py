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

from ioassess.inputs.job import META, op_counts
from ioassess.models.plain import finite_or_none, ratio_or_none
from ioassess.parallel import process_runs

from .access_patterns import IoInsideCalls, RequestStreams, access_patterns
from .classify import CAUSES, ROW_CLASSES, Classifier, Evidence, classified, estimate_totals, joined_own_lines
from .findings import recommendations
from .latency import LatencyHistograms
from .io_model import WriteSpan, io_model_cell, site_grid_placement, write_throughput
from .ledger import OpLedger, io_rows, job_ledger, total
from .metadata import MetadataCalls, known_only_from_metadata, metadata_section
from .model_choice import file_models
from .passes import CHUNK_OPS, chunks_of, run_in_parallel, run_passes
from .processes import (MpiioCalls, launcher_processes, per_process_view, pid_or_none, process_io, process_table,
                        shared_record_ranks)
from .schema import check_if_asked
from .stakes import ClassLoss, JobSeconds, WallClock
from .storage_targets import storage_targets
from .sections import (AsynchronousIO, ClassSums, CollectiveWork, FilePatterns, Flushes, IoEnd, KernelWord,
                       LayerAmounts, OpSamples, OpsInWindows, SizeSums, Timeline, class_table, collective_io,
                       file_system_while_running, file_table, io_uring_instances, kernel_word, layer_table,
                       mapped_files, model_lines, per_file_io, runtime_files, scatter_sample, size_table,
                       slowdown_timeline, tail_statistics, unassessed_module_table)
from ioassess.site.probe.during_job import slow_span_windows, with_job_ops

FORMAT = "ioassess-assessment"
FORMAT_VERSION = 1
# The first reading of the ops (the evidence) takes less than the second (the classification
# and every section's passes): its share of the work, for a progress bar.
FIRST_READING_SHARE = 0.3


def assess(job, model, model_source="", site_grid=None, model_choice=None, probe_db=None, history=None,
           chunk_ops=CHUNK_OPS, workers=None, progress=None):
    """The assessment (a dict) of a Job under a CauseModel. site_grid: None, or the site's
    I/O-model grid to place the job on, {"path", "grid"} (a grid of ioassess.site.iomodels.load_grid),
    or {"path", "problem"} for one that could not be used. model_choice: how the model was
    chosen and why (report.model_choice), or None; where it gives a file system a model of its
    own, that model judges the ops of its files (model_choice.file_models). probe_db: the file-system probe's store, or
    None. history: history(assessment) -> how this run compares with its application's last
    runs at the site (the epilog asks the site's store, ioassess.site.fleet.history), or None.
    chunk_ops: ops per chunk of the per-op passes (report/passes.py), workers: how many
    processes run them, progress(share, label): told each share of the work done
    (op_pass_results). With
    IOASSESS_CHECK_SCHEMA=1 (the tests) it raises report.schema.SchemaMismatch when the
    assessment breaks its JSON Schema (report/assessment.schema.json)."""
    models = file_models(job, model, model_source, model_choice)
    per_total = estimate_totals(job, model, models)
    file_system = file_system_while_running(job, probe_db)
    done = op_pass_results(job, models, slow_span_windows(file_system), chunk_ops, workers, progress)
    own_lines = done.pop("own_lines")
    ledger = job_ledger(job, done["ledger"], per_total)
    per_process = process_io(job, ledger)
    shared = shared_record_ranks(job, per_total)
    aggregation, collective = done["collective"]
    clock = WallClock(job)
    processes = process_table(job, per_process, shared, aggregation, done["mpiio"])
    per_file = per_file_io(job, ledger)
    class_sums, own_cached_ops = done["classes"]
    headline = headline_numbers(job, class_sums, own_cached_ops, ledger, processes)
    cell = {**io_model_cell(job, ledger), **write_throughput(ledger, done["write_span"])}
    assessment = {
        "format": FORMAT,
        "version": FORMAT_VERSION,
        "job": job_facts(job, cell, known_only_from_metadata(job, ledger, done["mpiio"])),
        "model": {"name": model.name, "description": model.description, "source": model_source,
                  "provenance": model.provenance, "choice": model_choice},
        "tier": tier_of(io_known(job, ledger, done["mpiio"])),
        "headline": headline,
        "kernel": kernel_word(job, done["kernel"], own_lines),
        "classes": class_table(job, class_sums, per_total),
        "flushes": done["flushes"],
        "layers": layer_table(job, done["layers"]),
        "unassessed_modules": unassessed_module_table(job),
        "asynchronous": done["asynchronous"],
        "mapped_files": mapped_files(job),
        "io_uring": io_uring_instances(job),
        "collective_io": collective_io(job, aggregation, collective),
        "top_files": file_table(job, ledger, per_file, done["files"]),
        "runtime_files": runtime_files(job, per_file),
        "sizes": size_table(job, done["sizes"]),
        "timeline": done["timeline"],
        "slowdown": slowdown_timeline(done["samples"]),
        "tails": tail_statistics(done["samples"]),
        "latency": done["latency"],
        "processes": processes,
        "per_process": per_process_view(job, ledger, per_process, per_total, shared),
        "io_model": cell,
        "site_grid": site_grid_placement(cell, site_grid),
        "scatter": scatter_sample(done["samples"]),
        "model_lines": model_lines(model),
        "file_system": with_job_ops(file_system, *done["ops_in_windows"]),
        "metadata": metadata_section(job, ledger, done["metadata"], headline["io_s"]),
        "access_patterns": access_patterns(job, done["request_streams"], done["io_inside_calls"], per_total, clock),
        "storage_targets": storage_targets(job, per_file),
    }
    assessment["history"] = history(assessment) if history else None
    assessment["recommendations"] = recommendations(assessment, JobSeconds(job, ledger, done["class_loss"],
                                                                           done["mpiio"], per_file, clock))
    check_if_asked(assessment)
    return assessment


def op_pass_results(job, models, slow_windows, chunk_ops=CHUNK_OPS, workers=None, progress=None):
    """The results of the per-op passes (op_passes) over the job's ops, by name, and its own
    cached lines ("own_lines"): the ops read twice, for the evidence the classification takes
    from all of them (classify.Evidence) and for the sections' passes of the ops classified.
    Runs of processes go to `workers` processes side by side (None: the CPUs here when the job
    has parallel.PARALLEL_OPS ops or more, else one); progress(share, label), if given, is told the
    share of the work (of 1) each run finished took."""
    workers, runs = process_runs(op_counts(job), workers)
    first = run_in_parallel(lambda run: run_passes({"evidence": Evidence(job, *models), "io_end": IoEnd()},
                                                   chunks_of(job, chunk_ops, run)), runs, workers,
                            _runs_done(progress, FIRST_READING_SHARE, "read the ops for the evidence"))
    evidence = first["evidence"].result()
    own_lines = joined_own_lines(evidence[1])
    passes = run_in_parallel(
        lambda run: run_passes(op_passes(job, models, len(own_lines["key"]), first["io_end"].result(), slow_windows),
                               classified(chunks_of(job, chunk_ops, run), Classifier(*models, evidence))),
        runs, workers, _runs_done(progress, 1 - FIRST_READING_SHARE, "classified the ops"))
    return {**{name: one.result() for name, one in passes.items()}, "own_lines": own_lines}


def _runs_done(progress, share, label):
    """run_in_parallel's done callback that tells progress each run's part of `share`."""
    if progress is None:
        return None
    return lambda finished, runs: progress(share / runs, label)


def op_passes(job, models, own_lines, io_end_s, slow_windows):
    """The per-op passes of the assessment's sections (report/passes.py), by name: models as
    model_choice.file_models gives them, own_lines the number of the job's own cached lines,
    io_end_s the end of the last I/O op (IoEnd), slow_windows the probe's slow spans
    (during_job.slow_span_windows)."""
    return {"ledger": OpLedger(job), "classes": ClassSums(), "kernel": KernelWord(own_lines),
            "flushes": Flushes(job, models),
            "layers": LayerAmounts(), "collective": CollectiveWork(job), "files": FilePatterns(job),
            "sizes": SizeSums(), "timeline": Timeline(io_end_s), "samples": OpSamples(),
            "latency": LatencyHistograms(job), "asynchronous": AsynchronousIO(job),
            "ops_in_windows": OpsInWindows(job, slow_windows), "metadata": MetadataCalls(job),
            "mpiio": MpiioCalls(job), "class_loss": ClassLoss(job), "write_span": WriteSpan(),
            "request_streams": RequestStreams(job), "io_inside_calls": IoInsideCalls(job)}


def tier_of(known):
    """How the job's reads, writes and syncs are known (metadata calls: the metadata section's
    tier), from known: (whether some are known one by one, whether some from counters)."""
    has_ops, has_totals = known
    return "ops" if has_ops and not has_totals else "counters" if has_totals and not has_ops else \
        "mixed" if has_ops else "none"


def io_known(job, ledger, mpiio):
    """(Whether some of the job's reads, writes and syncs are known one by one: the ledger's ops
    and MPI-IO's (mpiio: processes.MpiioCalls'), whether some from counters: Job.totals)."""
    one_by_one = bool(np.any(~ledger["estimated"] & io_rows(ledger))) or bool(len(mpiio["process"]))
    return one_by_one, bool(np.any(job.totals["direction"] != META))


def job_facts(job, cell, metadata_only):
    """The job's facts; processes with I/O are the I/O-model cell's processes doing I/O (every
    rank when a shared-file record moved data), launchers are the processes of no rank in a job
    whose other processes have ranks (mpiexec and its proxies). Files and Darshan ranks known only
    from metadata calls (metadata_only: metadata.known_only_from_metadata's) are the metadata
    section's, not counted here."""
    launchers = set(launcher_processes(job))
    hosts = collections.Counter(p.hostname for i, p in enumerate(job.processes) if p.hostname and i not in launchers)
    unfinished = [p for p in job.processes if p.source == "trace" and p.end_reason == "running/killed"]
    metadata_files, metadata_processes = metadata_only
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


def headline_numbers(job, class_sums, own_cached_ops, ledger, processes):
    """The job's I/O time in one account: io_s = time if cached + time lost compared with cached
    I/O (what caching would save, lost_by_cause: waiting for storage, writing whole pages of
    uncached files into new pages) + slowness caching would not save (slowness_by_cause: stalls,
    allocation, memory), each a sum over the ledger (class_sums: ClassSums')."""
    io_in_ledger = io_rows(ledger)
    job_total = total(ledger, io_in_ledger)
    io_s, lost_low, lost_high = job_total["seconds"], job_total["lost_low_s"], job_total["lost_high_s"]
    slowness = job_total["slowness_s"]
    lost_by_cause, slowness_by_cause = collections.Counter(), collections.Counter()
    for code, cls in enumerate(ROW_CLASSES):
        if cls in CAUSES:
            cause = "storage" if CAUSES[cls] == "storage" else "new_pages"
            lost_by_cause[cause] += float(class_sums["lost_s"][code].sum())
            slowness_by_cause[CAUSES[cls]] += float(class_sums["slowness_s"][code].sum())
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
        "own_cached_ops": int(own_cached_ops),
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
