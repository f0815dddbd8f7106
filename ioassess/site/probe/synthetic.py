"""Probe history made up for the bench and the tests: a round per second of every op, each op's
durations log-normal around its typical duration, some spans slower by a factor."""
import numpy as np

from .store import US
from .target import OPS

TYPICAL_SECONDS = {"read_1MiB": 2e-3, "write_1MiB": 3e-3, "read_4KiB": 2e-4, "write_4KiB": 3e-4,
                   "create": 6e-5, "stat": 1e-5, "read": 4e-5, "delete": 5e-5}
SPREAD = 0.3          # sigma of the log of a duration
CHUNK_S = 6 * 3600


def add_history(store, target, start_s, seconds, slow_spans=(), seed=0, interval_s=1.0):
    """Rounds every interval_s over [start, start + seconds) into the store's samples for target
    (an id); slow_spans: (start s, end s, factor, op names) whose ops take factor times longer."""
    generator = np.random.default_rng(seed)
    typical = np.array([TYPICAL_SECONDS[op] for op in OPS])
    for chunk in np.arange(start_s, start_s + seconds, CHUNK_S):
        rounds = np.arange(chunk, min(chunk + CHUNK_S, start_s + seconds), interval_s)
        starts = (rounds[:, None] + np.arange(len(OPS)) * 1e-3).ravel()
        durations = (typical[None, :] * generator.lognormal(0.0, SPREAD, (rounds.size, len(OPS)))).ravel()
        ops = np.tile(np.arange(len(OPS)), rounds.size)
        for span_start, span_end, factor, names in slow_spans:
            slowed = (starts >= span_start) & (starts < span_end) & np.isin(ops, [OPS.index(n) for n in names])
            durations[slowed] *= factor
        rows = zip([target] * ops.size, ops.tolist(), np.round(starts * US).astype(np.int64).tolist(),
                   np.maximum(1, np.round(durations * 1e9)).astype(np.int64).tolist())
        with store.db:
            store.db.execute("BEGIN")
            store.db.executemany("INSERT OR REPLACE INTO samples VALUES (?, ?, ?, ?)", rows)
