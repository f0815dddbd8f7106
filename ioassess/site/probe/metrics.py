"""The probe's Prometheus exporter (`--metrics-port`, the standard client library's metrics): per
target and op the last duration, the normal, and the slowdown quantiles of the current interval
(the last WINDOW_S seconds); per target the failed rounds.

The probe's process only sets the values after each round and hands their exposition to a
server process of its own over a pipe, without ever waiting on it: no connection, however many
and however slow, takes the probe's memory, threads or time (the op durations it measures would
include them). The server (serve()) is one thread over at most MAX_CONNECTIONS connections, the
oldest closed to make room for a new one, each closed CONNECTION_TIMEOUT_S after it was
accepted; it listens on 127.0.0.1 unless an address is given."""
import collections
import errno
import fcntl
import os
import selectors
import signal
import socket
import struct
import time

import numpy as np

from .slowdown import QUANTILE_NAMES, QUANTILES, normals
from .target import OPS

WINDOW_S = 60.0
NORMAL_REFRESH_S = 600.0
# A normal of fewer samples is refreshed every round: a new probe's first round alone is no normal.
NORMAL_MIN_SAMPLES = 100
MAX_CONNECTIONS = 64
CONNECTION_TIMEOUT_S = 10.0
LISTEN_BACKLOG = 128
MAX_REQUEST_BYTES = 8192
PIPE_BYTES = 1 << 20          # so that an exposition goes over at once
FRAME = struct.Struct("<Q")   # each exposition: its length, then its bytes


class MetricsUnavailable(Exception):
    """No exporter: prometheus_client is not installed, or the address cannot be had; str()
    says which."""


class Exporter:
    def __init__(self, address, port, normal_days):
        try:
            from prometheus_client import CollectorRegistry, Counter, Gauge
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
        self.unsent = b""
        listener = listening_socket(address, port)
        reading, self.pipe = os.pipe2(os.O_CLOEXEC)
        self.server = os.fork()
        if self.server == 0:
            os.close(self.pipe)
            try:
                serve(listener, reading)
            finally:
                os._exit(0)
        listener.close()
        os.close(reading)
        os.set_blocking(self.pipe, False)
        try:
            fcntl.fcntl(self.pipe, fcntl.F_SETPIPE_SZ, PIPE_BYTES)
        except OSError:   # above the system's pipe-max-size: a large exposition goes over in pieces
            pass
        self._publish()

    def close(self):
        """End the server process."""
        os.close(self.pipe)
        os.kill(self.server, signal.SIGTERM)
        os.waitpid(self.server, 0)

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
        self._publish()

    def _publish(self):
        """Hand the current exposition to the server, as much of it as the pipe takes now; the
        rest goes with the next round's, which waits for it (the server may lag a round)."""
        from prometheus_client import generate_latest
        if not self.unsent:
            exposition = generate_latest(self.registry)
            self.unsent = FRAME.pack(len(exposition)) + exposition
        try:
            self.unsent = self.unsent[os.write(self.pipe, self.unsent):]
        except BlockingIOError:
            pass
        except BrokenPipeError:   # the server ended (killed): the probe goes on without it
            self.unsent = b""


def listening_socket(address, port):
    """A TCP socket listening on address:port (a numeric address: no name service to wait on);
    MetricsUnavailable naming them if it cannot."""
    where = f"--metrics-address {address} --metrics-port {port}"
    try:
        family, kind, protocol, _, bound = socket.getaddrinfo(
            address, port, type=socket.SOCK_STREAM,
            flags=socket.AI_PASSIVE | socket.AI_NUMERICHOST | socket.AI_NUMERICSERV)[0]
    except socket.gaierror as error:
        raise MetricsUnavailable(f"{where}: {error.strerror}") from None
    listener = socket.socket(family, kind, protocol)
    try:
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(bound)
        listener.listen(LISTEN_BACKLOG)
    except OSError as error:
        listener.close()
        raise MetricsUnavailable(f"{where}: {error.strerror}") from None
    return listener


def serve(listener, pipe):
    """The server process: answer each connection's request with the latest exposition the
    probe handed over the pipe, until the pipe closes. Never returns a traceback's way: a signal
    ends it with its default action."""
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, signal.SIG_DFL)
    from prometheus_client import CONTENT_TYPE_LATEST
    listener.setblocking(False)
    selector = selectors.DefaultSelector()
    selector.register(listener, selectors.EVENT_READ, "accept")
    selector.register(pipe, selectors.EVENT_READ, "pipe")
    connections = {}   # socket -> _Connection, oldest first
    received, exposition = b"", b""
    while True:
        for key, _ in selector.select(_next_timeout(connections)):
            if key.data == "accept":
                _accept(listener, selector, connections)
            elif key.data == "pipe":
                chunk = os.read(pipe, PIPE_BYTES)
                if not chunk:
                    return
                received, exposition = _frames(received + chunk, exposition)
            elif key.fileobj in connections:
                _exchange(connections[key.fileobj], selector, connections, exposition, CONTENT_TYPE_LATEST)
        now = time.monotonic()
        for connection in [c for c in connections.values() if c.deadline <= now]:
            _close(connection.socket, selector, connections)


class _Connection:
    def __init__(self, sock):
        self.socket = sock
        self.deadline = time.monotonic() + CONNECTION_TIMEOUT_S
        self.request = b""
        self.response = None    # the bytes left to send, once the request is read


def _next_timeout(connections):
    oldest = min((connection.deadline for connection in connections.values()), default=None)
    return None if oldest is None else max(0.0, oldest - time.monotonic())


def _accept(listener, selector, connections):
    while True:
        try:
            sock, _ = listener.accept()
        except (BlockingIOError, InterruptedError):
            return
        except OSError as error:   # out of descriptors, or a connection reset before its accept
            if error.errno in (errno.EMFILE, errno.ENFILE) and connections:
                _close(next(iter(connections)), selector, connections)
            return
        if len(connections) >= MAX_CONNECTIONS:
            _close(next(iter(connections)), selector, connections)
        sock.setblocking(False)
        connections[sock] = _Connection(sock)
        selector.register(sock, selectors.EVENT_READ)


def _exchange(connection, selector, connections, exposition, content_type):
    """Read the request; once its head is whole, send the answer; close when it is sent."""
    try:
        if connection.response is None:
            chunk = connection.socket.recv(MAX_REQUEST_BYTES)
            connection.request += chunk
            if not chunk or len(connection.request) > MAX_REQUEST_BYTES:
                _close(connection.socket, selector, connections)
                return
            if b"\r\n\r\n" not in connection.request and b"\n\n" not in connection.request:
                return
            connection.response = _response(connection.request, exposition, content_type)
            selector.modify(connection.socket, selectors.EVENT_WRITE)
        connection.response = connection.response[connection.socket.send(connection.response):]
    except (BlockingIOError, InterruptedError):
        return
    except OSError:
        connection.response = b""
    if connection.response == b"":
        _close(connection.socket, selector, connections)


def _response(request, exposition, content_type):
    method, _, rest = request.partition(b" ")
    path = rest.split(b" ", 1)[0].split(b"?", 1)[0]
    if method not in (b"GET", b"HEAD"):
        status, body, content_type = "405 Method Not Allowed", b"", "text/plain"
    elif path not in (b"/", b"/metrics"):
        status, body, content_type = "404 Not Found", b"", "text/plain"
    else:
        status, body = "200 OK", exposition
    head = (f"HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\nContent-Length: {len(body)}\r\n"
            "Connection: close\r\n\r\n").encode()
    return head + (body if method == b"GET" else b"")


def _frames(received, exposition):
    """(the bytes after the last whole frame, the last whole frame's exposition)."""
    while len(received) >= FRAME.size:
        length = FRAME.unpack_from(received)[0]
        if len(received) < FRAME.size + length:
            break
        exposition = received[FRAME.size:FRAME.size + length]
        received = received[FRAME.size + length:]
    return received, exposition


def _close(sock, selector, connections):
    selector.unregister(sock)
    del connections[sock]
    sock.close()
