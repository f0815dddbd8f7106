"""ioassess: per-operation I/O recorder and assessment for HPC jobs.

This package is the small core: the trace reader (ioassess.trace), the trace format
(ioassess.traceformat), the `ioassess` command line (ioassess.cli) and the path of the
recorder library that `pip install` builds into the package.
"""
import os

from .trace import FileInfo, ProcessInfo, TraceFileError, TraceSet, read_trace_dir, read_trace_file, totals
from .traceformat import OP_DIRECTION, OP_NAMES

__all__ = ["FileInfo", "OP_DIRECTION", "OP_NAMES", "ProcessInfo", "TraceFileError", "TraceSet", "read_trace_dir",
           "read_trace_file", "recorder_library_path", "totals"]

# Overrides the library path, e.g. for a library built with `make -C plugin` in a source tree.
LIBRARY_ENV = "IOASSESS_LIBRARY"


def recorder_library_path():
    """Path of libioassess.so: $IOASSESS_LIBRARY if set, else the one installed in the package."""
    return os.environ.get(LIBRARY_ENV) or os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib",
                                                       "libioassess.so")
