"""`ioassess fleet ingest`: a site's history into the store (docs/fleet.md, "Back-filling").
Assessment JSON files, Darshan logs and trace directories (or directories holding any of them,
such as DARSHAN_LOGPATH/<year>/<month>/<day>/ trees) are assessed in parallel processes, spooled,
and compacted a chunk at a time; an input that cannot be assessed is one row of the rejects table.
Inputs already in the store (jobs.source) or among its rejects are skipped, so a run stopped at
any point is taken up again by running it again."""
import json
import multiprocessing
import os

from ...escape import printable
from .record import job_record
from .schema import RecordError
from .spool import spool_record
from .store import REJECTS, add_rejects, column_values, compact

# Inputs assessed between two compactions: the spool holds at most this many records.
CHUNK = 2000
DARSHAN_SUFFIX = ".darshan"
JSON_SUFFIX = ".json"
TRACE_SUFFIX = ".iot"


def inputs_under(paths):
    """The inputs of the paths given, in a stable order: files as they are; under a directory,
    its Darshan logs and assessment JSON files, and each directory holding traces as one input."""
    for path in paths:
        if not os.path.isdir(path):
            yield os.path.abspath(path)
            continue
        for directory, subdirectories, files in os.walk(path):
            subdirectories.sort()
            if any(name.endswith(TRACE_SUFFIX) for name in files):
                yield os.path.abspath(directory)
            for name in sorted(files):
                if name.endswith((DARSHAN_SUFFIX, JSON_SUFFIX)):
                    yield os.path.abspath(os.path.join(directory, name))


def assess_input(path):
    """(path, record, None) or (path, None, the problem in one line), in a worker process."""
    try:
        if path.endswith(JSON_SUFFIX):
            with open(path, "rb") as f:
                assessment = json.loads(f.read())
        else:
            from ...report import assess, json_safe, load_and_choose
            owner = os.stat(path).st_uid if os.path.isdir(path) else None
            job, model, model_path, choice = load_and_choose([path], None, owner)
            assessment = json_safe(assess(job, model, model_path, None, choice, None))
        record = job_record(assessment, source=path)
        return path, record, None
    except (RecordError, ValueError, OSError) as error:
        return path, None, printable(str(error)).splitlines()[0][:300] if str(error) else type(error).__name__
    except Exception as error:   # a damaged input is one line in the rejects, never the end of the run
        return path, None, printable(f"{type(error).__name__}: {error}").splitlines()[0][:300]


def done_sources(store):
    """The inputs the store already has a job or a reject of."""
    return set(column_values(store, "jobs", "source")) | set(column_values(store, REJECTS, "source"))


def ingest(store, paths, processes=None, progress=None):
    """{"inputs", "skipped", "added", "rejected"}; progress(done, total) after each input."""
    compact(store)   # what an interrupted run spooled first, so that its inputs count as done
    done = done_sources(store)
    inputs = list(dict.fromkeys(inputs_under(paths)))
    todo = [path for path in inputs if path not in done]
    counts = {"inputs": len(inputs), "skipped": len(inputs) - len(todo), "added": 0, "rejected": 0}
    finished = 0
    with multiprocessing.get_context("forkserver").Pool(processes or os.cpu_count()) as pool:
        for start in range(0, len(todo), CHUNK):
            rejects = []
            for path, record, problem in pool.imap_unordered(assess_input, todo[start:start + CHUNK], chunksize=8):
                if problem:
                    rejects.append({"source": path, "problem": problem})
                else:
                    spool_record(store, record)
                finished += 1
                if progress:
                    progress(finished, len(todo))
            add_rejects(store, rejects)
            compacted = compact(store)
            counts["added"] += compacted["added"] if compacted else 0
            counts["rejected"] += len(rejects) + (compacted["rejected"] if compacted else 0)
    return counts
