#!/bin/sh
# Slurm Epilog (or TaskEpilog) for ioassess: the ending job's I/O report (docs/epilog.md).
#   slurm.conf:  Epilog=/etc/slurm/epilog.d/ioassess.sh
# Slurm gives an Epilog no search path, so IOASSESS is the full path of the installed command
# (`command -v ioassess` where it works); set PYTHONPATH too when ioassess is installed with
# `pip install --prefix`. CONFIG is the site's settings. `ioassess epilog` exits 0 whatever
# happens; the `exit 0` below also covers an installation that cannot start at all, since a
# failing Epilog drains the node.
IOASSESS=${IOASSESS:-/usr/local/bin/ioassess}
CONFIG=/etc/ioassess/epilog.conf
"$IOASSESS" epilog --config "$CONFIG"
exit 0
