"""The file-system probe (Kunkel & Betke 2019; docs/probe.md): `ioassess probe run` times small
data and metadata ops on each target every interval (target.py, run.py) into an SQLite store
(store.py); the slowdown per interval against the normal (slowdown.py) goes into `ioassess probe
report` and the job report's "The file system during this job".
"""
