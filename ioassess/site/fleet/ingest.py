"""`ioassess fleet ingest`: a site's history into the store (docs/fleet.md, "Back-filling").
Assessment JSON files, Darshan logs and trace directories (or directories holding any of them,
such as DARSHAN_LOGPATH/<year>/<month>/<day>/ trees) are assessed in parallel processes, spooled,
and compacted a chunk at a time; an input that cannot be assessed is one row of the rejects table.
Inputs already in the store (jobs.source) or among its rejects are skipped, so a run stopped at
any point is taken up again by running it again."""
import functools
import json
import multiprocessing
import multiprocessing.connection
import os
import signal

from ...escape import printable
from ...inputs.darshan_util import read_logs_in_this_process
from ...inputs.load import LoadError
from ...jsonfile import JsonFileError
from .record import job_record
from .schema import RecordError
from .spool import spool_record
from .store import REJECTS, add_rejects, column_values, compact, stop_point

# Inputs assessed between two compactions: the spool holds at most this many records.
CHUNK = 2000
# The most of a problem a reject keeps.
PROBLEM_CHARS = 1000
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
            grid, probe_db = _site_context()
            assessment = json_safe(assess(job, model, model_path, grid, choice, probe_db))
        record = job_record(assessment, source=path)
        return path, record, None
    except (LoadError, JsonFileError, RecordError, ValueError, OSError) as error:   # one line, naming the input
        return path, None, _line(str(error)) if str(error) else type(error).__name__
    except Exception as error:   # a damaged input is one line in the rejects, never the end of the run
        return path, None, _line(f"{type(error).__name__}: {error}")


def _line(problem):
    return printable(problem).splitlines()[0][:PROBLEM_CHARS]


@functools.cache
def _site_context():
    """The site grid and the probe's store, as `ioassess report` finds them (read once a worker)."""
    from ...report import find_probe_db, find_site_grid
    return find_site_grid(None), find_probe_db(None)


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
    with Workers(processes or os.cpu_count()) as workers:
        for start in range(0, len(todo), CHUNK):
            rejects = []
            for path, record, problem in workers.assessed(todo[start:start + CHUNK]):
                if problem:
                    rejects.append({"source": path, "problem": problem})
                else:
                    spool_record(store, record)
                    stop_point("record spooled")
                finished += 1
                if progress:
                    progress(finished, len(todo))
            add_rejects(store, rejects)
            stop_point("rejects added")
            compacted = compact(store)
            counts["added"] += compacted["added"] if compacted else 0
            counts["rejected"] += len(rejects) + (compacted["rejected"] if compacted else 0)
    return counts


class Workers:
    """Processes that assess one input at a time, reading Darshan logs in their own process. A
    worker that dies (darshan-util aborting on a damaged log, the kernel's OOM killer) is
    replaced, and its input is assessed once more by a fresh worker reading the log in a child
    process of its own, as `ioassess report` does: a log that crashes darshan-util is then a
    reject saying so in report's words; if the worker dies again, a reject saying how."""

    def __init__(self, count):
        self.context = multiprocessing.get_context("forkserver")
        # imported once, by the server the workers are forked from
        self.context.set_forkserver_preload(["ioassess.report", __name__])
        self.count = count
        self.idle = []

    def __enter__(self):
        return self

    def __exit__(self, *_):
        for connection, process in self.idle:
            connection.close()   # the worker reads the end of its input and ends
            process.join()

    def assessed(self, paths):
        """(path, record, None) or (path, None, problem) for each path, in the order they end."""
        waiting = [(path, 0) for path in reversed(paths)]
        busy = {}   # connection -> (process, path, deaths)
        while waiting or busy:
            while waiting and (self.idle or len(busy) < self.count):
                connection, process = self.idle.pop() if self.idle else self._started()
                path, deaths = waiting.pop()
                connection.send((path, deaths > 0))
                busy[connection] = (process, path, deaths)
            for connection in multiprocessing.connection.wait(list(busy)):
                process, path, deaths = busy.pop(connection)
                try:
                    answer = connection.recv()
                except (EOFError, OSError):
                    connection.close()
                    process.join()
                    if deaths == 0:
                        waiting.append((path, 1))
                    else:
                        yield path, None, f"the process assessing it died twice ({_ending(process.exitcode)})"
                    continue
                self.idle.append((connection, process))
                yield answer

    def _started(self):
        ours, theirs = self.context.Pipe()
        process = self.context.Process(target=_work, args=(theirs,), daemon=True)
        process.start()
        theirs.close()
        return ours, process


def _ending(exit_code):
    return f"killed by {signal.Signals(-exit_code).name}" if exit_code < 0 else f"exit status {exit_code}"


def _work(connection):
    """A worker: assess each (path, careful) the parent sends, until the parent closes the
    connection or is gone (an interrupt is the parent's to handle)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    while True:
        try:
            path, careful = connection.recv()
        except (EOFError, OSError):
            return
        stop_point("input taken")
        read_logs_in_this_process(not careful)
        connection.send(assess_input(path))
