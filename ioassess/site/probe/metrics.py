"""The probe's Prometheus exporter (`--metrics-port`, the standard client library): per target
and op the last duration, the normal, and the slowdown quantiles of the current interval (the
last WINDOW_S seconds); per target the failed rounds. Served from the client library's HTTP
thread; the probe's own thread only sets the values after each round."""
import collections
import time

import numpy as np

from .slowdown import QUANTILE_NAMES, QUANTILES, normals
from .target import OPS

WINDOW_S = 60.0
NORMAL_REFRESH_S = 600.0
# A normal of fewer samples is refreshed every round: a new probe's first round alone is no normal.
NORMAL_MIN_SAMPLES = 100


class MetricsUnavailable(Exception):
    """No exporter: prometheus_client is not installed, or the port cannot be had; str() says
    which."""


class Exporter:
    def __init__(self, port, normal_days):
        try:
            from prometheus_client import CollectorRegistry, Counter, Gauge, start_http_server
        except ImportError:
            raise MetricsUnavailable("--metrics-port needs the Python package prometheus_client "
                                     "(pip install prometheus_client, or make deps)") from None
        self.registry = CollectorRegistry()
        self.last = Gauge("ioassess_probe_last_seconds", "Duration of the op in the last round",
                          ["target", "op"], registry=self.registry)
        self.normal = Gauge("ioassess_probe_normal_seconds", "The op's normal: its median duration over the "
                            "normal window", ["target", "op"], registry=self.registry)
        self.slowdown = Gauge("ioassess_probe_slowdown", f"Quantile of duration / normal over the last "
                              f"{WINDOW_S:g} s", ["target", "op", "quantile"], registry=self.registry)
        self.failures = Counter("ioassess_probe_failed_rounds", "Rounds of the target that stopped at a failing op",
                                ["target"], registry=self.registry)
        self.normal_days = normal_days
        self.recent = collections.defaultdict(collections.deque)   # (target, op) -> (time, seconds)
        self.normals = {}
        self.normals_at = -NORMAL_REFRESH_S
        self.normals_settled = False
        try:
            start_http_server(port, registry=self.registry)
        except OSError as error:
            raise MetricsUnavailable(f"--metrics-port {port}: {error.strerror}") from None

    def observe(self, name, op, seconds):
        self.last.labels(name, OPS[op]).set(seconds)
        self.recent[name, op].append((time.monotonic(), seconds))

    def failed(self, name):
        self.failures.labels(name).inc()

    def round_done(self, store):
        now = time.monotonic()
        if now - self.normals_at >= NORMAL_REFRESH_S or not self.normals_settled or \
                any(name not in self.normals for name, _ in self.recent):
            self.normals_at = now
            found = {name: normals(store, target, time.time(), self.normal_days)
                     for name, (target, _, _) in store.targets().items()}
            self.normals = {name: medians for name, (medians, _) in found.items()}
            self.normals_settled = all(n >= NORMAL_MIN_SAMPLES for _, counts in found.values() for n in counts)
        for (name, op), recent in self.recent.items():
            while recent and recent[0][0] < now - WINDOW_S:
                recent.popleft()
            normal = self.normals.get(name, [None] * len(OPS))[op]
            if normal is None:
                continue
            self.normal.labels(name, OPS[op]).set(normal)
            if recent:
                ratios = np.quantile(np.array([seconds for _, seconds in recent]) / normal, QUANTILES)
                for quantile, value in zip(QUANTILE_NAMES, ratios):
                    self.slowdown.labels(name, OPS[op], quantile).set(value)
