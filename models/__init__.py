"""Cause models and statistics of ioassess (installed as ioassess.models).

This package will hold pure functions on numpy arrays, with no file-format knowledge except the
model JSON: the density clustering of log durations (Gaussian KDE with linear binning and FFT),
the linear cause models per class (memcpy, cached, uncached, slow), op kind and memory layout
and the classification of ops by them (Kunkel 2015), time lost compared with cached I/O, tail
statistics (head/tail split by KS, Normal head, power-law and other tails, order statistics for
striped requests; Dong, Byna, Wu), slowdown quantiles (Kunkel & Betke), the I/O-model class of
a job (Sisneros), the training of cause models, and the shipped models in pretrained/*.json.
"""
