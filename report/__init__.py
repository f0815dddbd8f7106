"""The ioassess report (installed as ioassess.report).

This package will hold the assessment of a job (time lost vs cached per class, op kind, file and
process; tail statistics; slowdown timeline; I/O-model class; probe slowdown) as plain,
JSON-serialisable data, and its rendering: plots and Jinja2 templates producing a
self-contained, offline-viewable report.html next to assessment.json, of bounded size whatever
the trace size, with every user-provided string escaped.
"""
