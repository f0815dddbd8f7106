"""ioassess: per-operation I/O recorder and assessment for HPC jobs.

The package: the paths of the recorder libraries that `pip install` builds into it (here), the
inputs (ioassess.inputs: traces, Darshan logs, the Job), the cause models and statistics
(ioassess.models), the assessment and its rendering (ioassess.report), the site's tools
(ioassess.site) and the `ioassess` command line (ioassess.cli). docs/architecture.md has the map.
"""
import os

from .inputs.trace import FileInfo, ProcessInfo, TraceFileError, TraceSet, read_trace_dir, read_trace_file, totals
from .inputs.traceformat import OP_DIRECTION, OP_NAMES

__all__ = ["FileInfo", "OP_DIRECTION", "OP_NAMES", "ProcessInfo", "TraceFileError", "TraceSet", "mpiio_library_path",
           "read_trace_dir", "read_trace_file", "recorder_library_path", "totals"]

# Overrides the library path, e.g. for a library built with `make -C plugin` in a source tree.
LIBRARY_ENV = "IOASSESS_LIBRARY"


def recorder_library_path():
    """Path of libioassess.so: $IOASSESS_LIBRARY if set, else the one installed in the package."""
    return os.environ.get(LIBRARY_ENV) or os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib",
                                                       "libioassess.so")


def mpiio_library_path():
    """Path of libioassess-mpiio.so, the MPI-IO recorder, beside libioassess.so; None when it was
    not built (no MPI compiler when the package was installed)."""
    path = os.path.join(os.path.dirname(recorder_library_path()), "libioassess-mpiio.so")
    return path if os.path.isfile(path) else None
