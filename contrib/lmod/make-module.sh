#!/bin/sh
# Usage: make-module.sh TRACE_ROOT > ioassess.lua
# Writes the Lmod module of the ioassess installation that `ioassess` and `python3` (or
# $PYTHON) find in this environment: run it where that installation works. TRACE_ROOT is the
# site's directory for traces, on a file system every node of a job sees; the module sends a
# job's traces to TRACE_ROOT/<user>/<job id>, which the epilog's trace_dir must match
# (TRACE_ROOT/%u/%j).
set -eu
if [ $# -ne 1 ]; then
    echo "usage: $0 TRACE_ROOT > ioassess.lua" >&2
    exit 2
fi
python=${PYTHON:-python3}
command=$(command -v ioassess) || { echo "$0: no ioassess command on PATH" >&2; exit 2; }
# From /, so that a source checkout in the current directory is not what gets imported.
package_parent=$(cd / && "$python" -c 'import ioassess, os; print(os.path.dirname(os.path.dirname(ioassess.__file__)))')
recorder=$(cd / && "$python" -c 'import ioassess; print(ioassess.recorder_library_path())')
mpiio_recorder=$(cd / && "$python" -c 'import ioassess; print(ioassess.mpiio_library_path() or "")')
sed -e "s|@BIN@|$(dirname "$command")|" -e "s|@PYTHONPATH@|$package_parent|" -e "s|@RECORDER@|$recorder|" \
    -e "s|@MPIIO_RECORDER@|$mpiio_recorder|" \
    -e "s|@TRACE_ROOT@|$1|" "$(dirname "$0")/ioassess.lua"
