"""ioassess: per-operation I/O recorder and assessment for HPC jobs.

This package is the small core: the trace reader (ioassess.trace), the trace format
(ioassess.traceformat), the `ioassess` command line (ioassess.cli) and the paths of the
recorder libraries that `pip install` builds into the package.
"""
import os

from .trace import FileInfo, ProcessInfo, TraceFileError, TraceSet, read_trace_dir, read_trace_file, totals
from .traceformat import OP_DIRECTION, OP_NAMES

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
