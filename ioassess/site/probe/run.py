"""`ioassess probe run`: one process probing every target once per interval, in order, one op
at a time (the paper's forking script made nodes unresponsive), into the store.

It never ends on its own for a failing target or store: each failure is one line on stderr when
it starts (`ioassess probe: NAME: OP: PATH: ERROR`, none while it lasts) and one when the target
works again, and the other targets go on being probed. SIGTERM and SIGINT end it after the round under way, so a
round and its rows are always whole; the probe then ends with status 0.
"""
import os
import select
import signal
import sqlite3
import sys
import time

from ...escape import printable
from .store import Store, StoreError
from .target import ProbeFailure, TargetProbe

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)
PRUNE_EVERY_S = 3600


class _Episodes:
    """One log line when a failure starts, one when it ends."""

    def __init__(self, stream):
        self.stream = stream
        self.failing = {}

    def failed(self, name, problem):
        if name not in self.failing:
            self.failing[name] = problem
            self.say(f"{name}: {problem}")

    def worked(self, name):
        if self.failing.pop(name, None) is not None:
            self.say(f"{name}: probing again")

    def say(self, line):
        self.stream.write(f"ioassess probe: {printable(line)}\n")
        self.stream.flush()


def run_probe(settings, rounds=None, stream=sys.stderr, metrics=None):
    """Probe settings.targets every settings.interval seconds until SIGTERM or SIGINT (or after
    `rounds` rounds). metrics: an Exporter (metrics.py), or None. Returns 0. Raises
    TargetUnusable, before anything is probed, for a target's directory that is missing or
    another probe's."""
    probes = [TargetProbe(target) for target in settings.targets]
    for probe in probes:
        probe.claim()
    store = Store(settings.db, writable=True)
    target_ids = {}
    log = _Episodes(stream)
    stop = _StopSignals()
    log.say(f"probing {', '.join(f'{t.name} ({t.dir})' for t in settings.targets)} every {settings.interval:g} s "
            f"into {settings.db}")
    try:
        next_round, last_minute, last_prune, done = time.monotonic(), int(time.time() // 60), 0.0, 0
        while rounds is None or done < rounds:
            rows = []
            for probe in probes:
                _probe_target(probe, store, target_ids, rows, log, metrics)
            if _store(log, store.add_samples, rows):
                log.worked("store")
            now = time.time()
            if int(now // 60) != last_minute:
                last_minute = int(now // 60)
                _store(log, store.aggregate, now)
            if now - last_prune >= PRUNE_EVERY_S:
                last_prune = now
                _store(log, store.prune, now, settings.raw_days, settings.aggregate_days)
            if metrics is not None:
                _store(log, metrics.round_done, store)
            done += 1
            if rounds is not None and done >= rounds:
                break
            next_round += settings.interval
            if next_round < time.monotonic():   # a round overran: skip the rounds missed
                next_round += (time.monotonic() - next_round) // settings.interval * settings.interval + \
                    settings.interval
            if stop.wait(max(0.0, next_round - time.monotonic())):
                break
        _store(log, store.aggregate, time.time())
    finally:
        store.close()
        stop.restore()
    log.say(f"stopped after {done} rounds")
    return 0


class _StopSignals:
    """SIGTERM and SIGINT only set a flag, and wake wait(). Not sigtimedwait with the signals
    blocked: numpy's threads would still take them, with their default action."""

    def __init__(self):
        self.received = []
        self.wakeup, wakeup_write = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        self.wakeup_write = wakeup_write
        self.previous_fd = signal.set_wakeup_fd(wakeup_write)
        self.previous = {signum: signal.signal(signum, self._received) for signum in STOP_SIGNALS}

    def _received(self, signum, _frame):
        self.received.append(signum)

    def wait(self, seconds):
        """Whether a stop signal came, waiting up to seconds for one."""
        if not self.received:
            select.select([self.wakeup], [], [], seconds)
        return bool(self.received)

    def restore(self):
        for signum, handler in self.previous.items():
            signal.signal(signum, handler)
        signal.set_wakeup_fd(self.previous_fd)
        os.close(self.wakeup)
        os.close(self.wakeup_write)


def _probe_target(probe, store, target_ids, rows, log, metrics):
    name = probe.target.name
    try:
        if not probe.ready:
            probe.prepare()
            target_ids[name] = store.target_id(probe.target, probe.io_mode)
        target = target_ids[name]

        def record(op, start, seconds):
            rows.append((target, op, start, seconds))
            if metrics is not None:
                metrics.observe(name, op, seconds)
        probe.round(record)
    except ProbeFailure as failure:
        log.failed(name, str(failure))
        if metrics is not None:
            metrics.failed(name)
    except sqlite3.Error as error:
        log.failed("store", f"{store.path}: {error}")
    else:
        log.worked(name)


def _store(log, action, *args):
    """Whether action(*args) on the store went through; a failure is logged as the store's."""
    try:
        action(*args)
    except (sqlite3.Error, StoreError) as error:
        log.failed("store", f"{error}")
        return False
    return True


def cleanup(settings, stream=sys.stderr):
    """Remove every target's probe files; returns 0, or 2 if a target's could not all be removed."""
    status = 0
    for target in settings.targets:
        try:
            removed = TargetProbe(target).cleanup()
        except (OSError, ProbeFailure) as error:
            stream.write(f"ioassess probe: {printable(f'{target.name}: {error}')}\n")
            status = 2
        else:
            stream.write(f"ioassess probe: {printable(f'{target.name}: removed {removed} files')}\n")
    return status
