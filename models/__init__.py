"""Cause models and statistics of ioassess (installed as ioassess.models).

Pure functions on numpy arrays, with no file-format knowledge except the model JSON:
density.py (R's density() of log10 durations: clusters, splits, cut-off), causes.py (the
segmented cause-model lines per op, class and memory layout; classification, time lost vs
cached; Kunkel 2015), modelfile.py (model JSON, validation, the shipped models in
pretrained/), families.py and tails.py
(head/tail mixture, tail families, Vuong test, order statistics; Dong, Byna, Wu), slowdown.py
(slowdown quantiles per interval; Kunkel & Betke), plain.py (finite numbers for JSON).
Training and calibration, which run programs, are site tools (ioassess/site/training.py); the
I/O-model class of a job (Sisneros) is computed in report/io_model.py.
"""
